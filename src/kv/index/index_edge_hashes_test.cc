// Black-box edge cases of KvIndex's engine-hash mapping: several hashes naming one block in
// one worker (cache_salt) removed in every order, with the worker's hashes kvroute's keys
// first or not; hashes sharing half their bits; a keyed worker switching to an engine map
// midway; and 12 hashes crafted to collide in the engine map's fingerprint or an entry's
// bottom half, checked against the reference model (kv/index/index_reference_model.h) on random
// streams. Shared helpers: kv/index/index_edge_test_util.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kv/index/index.h"
#include "kv/index/index_edge_test_util.h"
#include "kv/index/index_flat_map.h"  // UnmixKey: crafting keys that collide in the layout
#include "kv/index/index_reference_model.h"
#include "kv/index/index_test_util.h"

namespace kvroute::kv {
namespace {

using testing::ApplySettled;
using testing::Batch;
using testing::ByWorker;
using testing::Hashes;
using testing::IndexEdgeTest;
using testing::Match;
using testing::PromptKeys;
using testing::ReferenceIndex;
using testing::Remove;
using testing::Settle;
using testing::Slice;
using testing::StatsTuple;
using testing::Store;

// ---------------------------------------------------------------------------------------------
// Several engine hashes naming one block in one worker (what cache_salt does: same tokens,
// same parent, different block hashes).

// Hashes A..E of block {5} and, per hash, a child {6}; worker 1. With `keyed`, A and its child
// are kvroute's own keys, so the worker starts without an engine map and switches at B.
class IndexSaltedHashesTest : public IndexEdgeTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    keys_ = PromptKeys(keyer_, {5, 6, 7});
    const bool keyed = GetParam();
    a_ = keyed ? keys_[0] : 11;
    a1_ = keyed ? keys_[1] : 21;
  }
  bool Held(const KvIndex& index, std::size_t depth) const {
    auto m = ByWorker(index.Lookup(keys_));
    return m.count(1) && m[1].depth[0] == depth;
  }
  std::uint32_t Depth(const KvIndex& index) const {
    auto m = ByWorker(index.Lookup(keys_));
    return m.count(1) ? m[1].depth[0] : 0;
  }
  static constexpr EngineHash kB = 12, kC = 13, kD = 14, kE = 15;
  std::vector<BlockKey> keys_;
  EngineHash a_ = 0, a1_ = 0;
};

TEST_P(IndexSaltedHashesTest, BlockIsHeldUntilItsLastHashIsRemovedInEveryOrder) {
  std::array<EngineHash, 3> order{kB, kC, kD};
  do {
    SCOPED_TRACE(::testing::Message() << "order " << order[0] << order[1] << order[2]);
    KvIndex index(keyer_);
    for (EngineHash h : {a_, kB, kC}) ApplySettled(index, 1, Store({h}, std::nullopt, {5}));
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 1u, 1u, 3u));
    ApplySettled(index, 1, Remove({a_}));  // the first hash goes, the block stays
    EXPECT_EQ(Depth(index), 1u);
    EXPECT_EQ(index.stats().engine_hashes, 2u);
    ApplySettled(index, 1, Remove({a_}));
    EXPECT_EQ(index.counters().unknown_removals, 1u);
    ApplySettled(index, 1, Store({kD}, std::nullopt, {5}));
    EXPECT_EQ(index.stats().engine_hashes, 3u);
    for (std::size_t k = 0; k < order.size(); ++k) {
      ApplySettled(index, 1, Remove({order[k]}));
      EXPECT_EQ(Depth(index), k + 1 < order.size() ? 1u : 0u) << k;
      EXPECT_EQ(index.stats().engine_hashes, order.size() - k - 1) << k;
    }
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 0u, 0u, 0u));
    // Removed hashes are unknown, as removals and as parents; a new hash stores it again.
    ApplySettled(index, 1, Remove({order[0], 99}));
    EXPECT_EQ(index.counters().unknown_removals, 3u);
    ApplySettled(index, 1, Store({31}, kB, {6}));
    EXPECT_EQ(index.counters().unknown_parent_runs, 1u);
    ApplySettled(index, 1, Store({kE}, std::nullopt, {5}));
    ApplySettled(index, 1, Store({32}, kE, {6}));
    EXPECT_EQ(Depth(index), 2u);
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 2u, 2u, 2u));
    EXPECT_EQ(index.counters().hash_conflicts, 0u);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST_P(IndexSaltedHashesTest, ChainsContinuingFromEachHashShareOneCanonicalChain) {
  for (EngineHash h : {a_, kB, kC}) ApplySettled(index_, 1, Store({h}, std::nullopt, {5}));
  // A child under each hash (one canonical child), a grandchild under B's child.
  ApplySettled(index_, 1,
               Batch({Store({a1_}, a_, {6}), Store({22}, kB, {6}), Store({23}, kC, {6}),
                      Store({41}, 22, {7})}));
  EXPECT_EQ(Depth(index_), 3u);
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 3u, 3u, 7u));
  ApplySettled(index_, 1, Remove({a_}));
  ApplySettled(index_, 1, Remove({22}));
  EXPECT_EQ(Depth(index_), 3u);  // block 0 via B and C, block 1 via A's and C's children
  ApplySettled(index_, 1, Remove({kB}));
  EXPECT_EQ(Depth(index_), 3u);
  // A child of B (removed) is an unknown-parent run; a child of A's child still chains.
  ApplySettled(index_, 1, Batch({Store({24}, kB, {6}), Store({42}, a1_, {7})}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  ApplySettled(index_, 1, Batch({Store({kD}, std::nullopt, {5}), Store({25}, kD, {6})}));
  // Block 0 via C and D only: both go, block 0 becomes a hole under its held children.
  ApplySettled(index_, 1, Remove({kC}));
  EXPECT_EQ(Depth(index_), 3u);
  ApplySettled(index_, 1, Remove({kD}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_)).count(1), 0u);
  EXPECT_EQ(index_.stats().nodes, 3u);
  // A new hash E for block 0 restores the whole chain under it.
  ApplySettled(index_, 1, Store({kE}, std::nullopt, {5}));
  EXPECT_EQ(Depth(index_), 3u);
  // Block 1 is held through a1, 23 and 25; block 2 through 41 and 42.
  ApplySettled(index_, 1, Remove({a1_, 23, 41}));
  EXPECT_EQ(Depth(index_), 3u);
  ApplySettled(index_, 1, Remove({25}));
  EXPECT_EQ(Depth(index_), 1u);  // block 1 a hole under block 2
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
  ExpectRestoredCopyAgrees({keys_, {keys_[0]}, {keys_[0], keys_[1]}});
  // A clear in the middle: the worker's lookups are empty, the others' unaffected.
  ApplySettled(index_, 2, Store({a_}, std::nullopt, {5}));
  ApplySettled(index_, 1, AllBlocksCleared{});
  auto m = ByWorker(index_.Lookup(keys_));
  EXPECT_EQ(m.count(1), 0u);
  EXPECT_EQ(m[2].depth[0], 1u);
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, 1u, 1u, 1u));
  // After the clear the worker starts over: an old hash as parent is unknown.
  ApplySettled(index_, 1, Store({26}, kE, {6}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 2u);
}

TEST_P(IndexSaltedHashesTest, SaltedCopiesInTwoTiersAreCountedPerTierAndHash) {
  // A in GPU twice, B in CPU, C in GPU: one block, GPU refs 3, CPU refs 1.
  ApplySettled(index_, 1,
               Batch({Store({a_}, std::nullopt, {5}), Store({a_}, std::nullopt, {5}),
                      Store({kB}, std::nullopt, {5}, "CPU"), Store({kC}, std::nullopt, {5})}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_))[1], Match(1, 1, 1, 1, 1, 1));
  ApplySettled(index_, 1, Remove({kB}, "DISK"));  // the block is not held in DISK
  EXPECT_EQ(index_.counters().unknown_removals, 1u);
  ApplySettled(index_, 1, Remove({a_, kC}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_))[1], Match(1, 1, 1, 1, 1, 1));
  EXPECT_EQ(index_.stats().engine_hashes, 2u);  // A (one copy left) and B
  ApplySettled(index_, 1, Remove({kB}, "CPU"));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_))[1], Match(1, 1, 1, 1, 1, 1));
  ApplySettled(index_, 1, Remove({a_}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
}

// Engine hashes equal in their low or their high 32 bits (an engine map may keep only half
// of a hash in its table) name different blocks, or one block, and stay told apart.
TEST_F(IndexEdgeTest, EngineHashesSharingHalfTheirBitsStayDistinct) {
  constexpr EngineHash kLo = 0x0000'0005, kHi = 0x0000'0001'0000'0000ULL;
  const EngineHash x = kHi | kLo, y = 2 * kHi | kLo, z = kHi | 6, x2 = 3 * kHi | kLo;
  // x: block {5}; y: block {5, 6} under x; z: block {7}; x2: block {5} again (salted).
  ApplySettled(index_, 1,
               Batch({Store({x}, std::nullopt, {5}), Store({y}, x, {6}),
                      Store({z}, std::nullopt, {7}), Store({x2}, std::nullopt, {5})}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 3u, 3u, 4u));
  EXPECT_EQ(Look(std::vector<std::uint32_t>{5, 6})[1], Match(1, 2, 2, 2, 2, 2));
  // Hashes sharing a half with held ones but never stored are unknown.
  ApplySettled(index_, 1, Remove({4 * kHi | kLo, kHi | 9, kLo, kHi}));
  EXPECT_EQ(index_.counters().unknown_removals, 4u);
  ApplySettled(index_, 1, Store({11}, kHi | 8, {6}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  ApplySettled(index_, 1, Remove({x}));
  EXPECT_EQ(Look(std::vector<std::uint32_t>{5, 6})[1], Match(1, 2, 2, 2, 2, 2));  // via x2
  ApplySettled(index_, 1, Remove({x2, z}));
  EXPECT_EQ(Look(std::vector<std::uint32_t>{5, 6}).count(1), 0u);
  EXPECT_TRUE(Look(std::vector<std::uint32_t>{7}).empty());
  ApplySettled(index_, 1, Remove({y}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
  EXPECT_EQ(index_.counters().unknown_removals, 4u);
}

INSTANTIATE_TEST_SUITE_P(EngineMapOrKeyedFirst, IndexSaltedHashesTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "KeyedFirst" : "EngineMap"; });

// A keyed worker (hashes are kvroute's keys) with a deep chain switches to a map midway.
TEST_F(IndexEdgeTest, KeyedWorkerSwitchingToAMapKeepsEveryCountAndParent) {
  std::vector<std::uint32_t> contents(300);
  for (std::uint32_t i = 0; i < contents.size(); ++i) contents[i] = 7 + i;
  const auto keys = PromptKeys(keyer_, contents);
  // Keyed: 300 blocks, block 150 twice (GPU), blocks 0..9 also in CPU.
  ApplySettled(index_, 1, Store({keys.begin(), keys.end()}, std::nullopt, contents));
  ApplySettled(index_, 1, Store({keys[150]}, keys[149], {contents[150]}));
  ApplySettled(
      index_, 1,
      Store({keys.begin(), keys.begin() + 10}, std::nullopt, Slice(contents, 0, 10), "CPU"));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 300u, 300u, 300u));
  // The switch: a salted hash of block 200 continuing from keyed block 199.
  ApplySettled(index_, 1, Store({777}, keys[199], {contents[200]}));
  EXPECT_EQ(index_.stats().engine_hashes, 301u);
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 300, 300, 300, 300, 300));
  // Keyed hashes still resolve, with their counts, as removals and as parents.
  ApplySettled(index_, 1, Remove({keys[150]}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1].depth[0], 300u);
  ApplySettled(index_, 1, Remove({keys[150], keys[200]}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1].depth[0], 150u);
  ApplySettled(index_, 1, Store({keys[150]}, keys[149], {contents[150]}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1].depth[0], 300u);  // 200 still held via 777
  ApplySettled(index_, 1, Remove({777}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 200, 200, 200, 200, 200));
  ApplySettled(index_, 1, Remove({keys[5]}, "CPU"));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 200, 200, 200, 200, 200));
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
  ExpectRestoredCopyAgrees({keys, {keys.begin(), keys.begin() + 201}});
  // A clear in the middle, then keyed again without a map.
  ApplySettled(index_, 1, AllBlocksCleared{});
  EXPECT_TRUE(ByWorker(index_.Lookup(keys)).empty());
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
  ApplySettled(index_, 1,
               Store({keys.begin(), keys.begin() + 3}, std::nullopt, Slice(contents, 0, 3)));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 3, 3, 3, 3, 3));
  EXPECT_EQ(index_.stats().engine_hashes, 3u);
}

// Engine hashes crafted so that their mixes (kv/index/index_flat_map.h MixKey) share the top half
// (the engine map's fingerprint in the 24-byte layout) or the bottom half (what a worker's
// entry keeps), including the halves 0 and 0xFFFFFFFF (the empty-slot marker's): 12 hashes,
// each naming one block of a 6-block chain per worker, two per block (salted duplicates).
// Random stores, removals, clears and worker removals on 3 workers, checked after every step
// against the model. Expectations do not depend on the mix: with another one these are just
// 12 hashes.
TEST(IndexEdgeCraftedHashesTest, HashesSharingAFingerprintOrABottomHalfAgreeWithTheModel) {
  std::vector<EngineHash> pool;
  for (std::uint64_t top : {0x0ULL, 0xFFFF'FFFFULL, 0x1234'5678ULL}) {
    for (std::uint64_t lo : {0x0ULL, 0x1ULL, 0xFFFF'FFFFULL, 0xFFFF'FFFEULL}) {
      pool.push_back(UnmixKey(top << 32 | lo));
    }
  }
  BlockKeyer keyer;
  const auto keys = PromptKeys(keyer, {1, 2, 3, 4, 5, 6});
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    auto uniform = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    KvIndex index(keyer);
    ReferenceIndex ref(keyer);
    // Hash i names block (i + w) % 6 of worker w's chain.
    auto block_of = [](int i, WorkerId w) { return static_cast<std::uint32_t>((i + w) % 6); };
    auto apply = [&](WorkerId w, const KvEvent& e) {
      ref.Apply(w, e);
      index.ApplyEvent(w, e);
      if (uniform(2) == 0) Settle(index);  // both the spilled and the packed form
    };
    for (int step = 0; step < 2000; ++step) {
      const WorkerId w = static_cast<WorkerId>(1 + uniform(3));
      const int op = uniform(100);
      const std::string medium = uniform(5) == 0 ? "CPU" : "GPU";
      if (op < 65) {
        const int i = uniform(12);
        const std::uint32_t b = block_of(i, w);
        std::optional<EngineHash> parent;
        if (b > 0) {
          // The two pool hashes naming block b - 1 for this worker.
          const int j = static_cast<int>((b - 1 + 6 - w % 6) % 6) + 6 * uniform(2);
          parent = pool[j];
        }
        apply(w, Store({pool[i]}, parent, {b + 1}, medium));
      } else if (op < 96) {
        std::vector<EngineHash> hashes{pool[uniform(12)]};
        if (uniform(2) == 0) hashes.push_back(pool[uniform(12)]);
        apply(w, Remove(std::move(hashes), medium));
      } else if (op < 98) {
        apply(w, AllBlocksCleared{});
      } else {
        ref.RemoveWorker(w);
        index.RemoveWorker(w);
      }
      for (std::size_t n : {keys.size(), std::size_t{3}}) {
        const std::vector<BlockKey> prompt(keys.begin(), keys.begin() + n);
        ASSERT_EQ(ByWorker(index.Lookup(prompt)), ref.Lookup(prompt)) << "step=" << step;
      }
      const IndexCounters got = index.counters();
      ASSERT_EQ(StatsTuple(index.stats()), StatsTuple(ref.Stats())) << "step=" << step;
      ASSERT_EQ(std::tuple(got.unknown_removals, got.unknown_parent_runs, got.hash_conflicts),
                std::tuple(ref.counters.unknown_removals, ref.counters.unknown_parent_runs,
                           ref.counters.hash_conflicts))
          << "step=" << step;
      if (step % 250 == 249) {
        KvIndex copy(keyer);
        const std::string image = index.Dump();
        ASSERT_TRUE(copy.Restore(image).has_value()) << "step=" << step;
        ASSERT_EQ(copy.Dump(), image) << "step=" << step;
        ASSERT_EQ(ByWorker(copy.Lookup(keys)), ref.Lookup(keys)) << "step=" << step;
      }
    }
  }
}

}  // namespace
}  // namespace kvroute::kv
