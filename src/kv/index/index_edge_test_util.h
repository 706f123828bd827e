// Shared helpers of the index edge tests (index_edge_*_test.cc): engine hashes and content
// slices for synthetic chains, Settle() (ends a write with every holder list packed), and the
// IndexEdgeTest fixture (an index, lookups by worker, restored-copy checks); StatsTuple comes
// from kv/index/index_reference_model.h. Public API only, so the tests hold whatever the internal
// layout.
//
// The fixture lives in a named namespace, not an anonymous one: TEST_F(IndexEdgeTest, ...)
// appears in several files of one binary, and GoogleTest requires one fixture type per suite.
// Thread safety: none (one test thread).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "kv/index/index.h"
#include "kv/index/index_reference_model.h"
#include "kv/index/index_test_util.h"

namespace kvroute::kv::testing {

// An engine hash of worker w's i-th block: never equal to a canonical key in practice.
inline EngineHash H(std::uint64_t w, std::uint64_t i) { return (w << 40) ^ (0x5A5A0000ULL + i); }

inline std::vector<EngineHash> Hashes(std::uint64_t w, std::uint32_t from, std::uint32_t to) {
  std::vector<EngineHash> out;
  for (std::uint32_t i = from; i < to; ++i) out.push_back(H(w, i));
  return out;
}

inline std::vector<std::uint32_t> Slice(const std::vector<std::uint32_t>& v, std::uint32_t from,
                                        std::uint32_t to) {
  return {v.begin() + from, v.begin() + to};
}

// Runs a no-op writer after a write: marking and removing a worker that never held anything
// must change nothing observable. (Written when the index packed spilled lists back only
// every ~1,024 writes, to force that packing; every writer call now ends packed.)
inline void Settle(KvIndex& index) {
  constexpr WorkerId kNobody = 0xFFFF'FFF0u;
  index.MarkStale(kNobody);
  index.RemoveWorker(kNobody);
}
inline void ApplySettled(KvIndex& index, WorkerId w, const KvEvent& e) {
  index.ApplyEvent(w, e);
  Settle(index);
}
inline void ApplySettled(KvIndex& index, WorkerId w, const KvEventBatch& b) {
  index.ApplyBatch(w, b);
  Settle(index);
}

class IndexEdgeTest : public ::testing::Test {
 protected:
  std::map<WorkerId, WorkerMatch> Look(std::span<const BlockKey> keys) const {
    return ByWorker(index_.Lookup(keys));
  }
  std::map<WorkerId, WorkerMatch> Look(const std::vector<std::uint32_t>& contents) const {
    return ByWorker(index_.Lookup(PromptKeys(keyer_, contents)));
  }
  // The key of a one-block continuation with content c under `parent`.
  BlockKey Child(BlockKey parent, std::uint32_t c) const {
    const std::vector<TokenId> tokens = TokensOf({c});
    return keyer_.Next(parent, tokens);
  }
  // A copy restored from a snapshot must dump the same bytes and answer the same lookups.
  void ExpectRestoredCopyAgrees(const std::vector<std::vector<BlockKey>>& prompts) {
    KvIndex copy(keyer_);
    const std::string image = index_.Dump();
    auto restored = copy.Restore(image);
    ASSERT_TRUE(restored.has_value()) << restored.error();
    EXPECT_EQ(copy.Dump(), image);
    EXPECT_EQ(StatsTuple(copy.stats()), StatsTuple(index_.stats()));
    for (const auto& keys : prompts) {
      EXPECT_EQ(ByWorker(copy.Lookup(keys)), Look(keys)) << "prompt of " << keys.size();
    }
  }

  BlockKeyer keyer_;
  KvIndex index_{keyer_};
};

}  // namespace kvroute::kv::testing
