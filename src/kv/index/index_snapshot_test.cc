// Snapshot: round trip, and rejection of corrupt or foreign images without changing the index.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>

#include "kv/index/index.h"
#include "kv/index/index_snapshot.h"
#include "kv/index/index_test_util.h"

namespace kvroute::kv {
namespace {

using testing::Batch;
using testing::ByWorker;
using testing::PromptKeys;
using testing::Remove;
using testing::Store;

class IndexSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    index_.ApplyBatch(
        1, Batch({Store({1, 2, 3, 4}, std::nullopt, {1, 2, 3, 4}), Store({3}, 2, {3}, "CPU"),
                  Remove({2}), Store({9}, std::nullopt, {1}, "GPU", "lora-x")}));
    index_.ApplyBatch(2,
                      Batch({Store({5, 6}, std::nullopt, {1, 2}), Store({5}, std::nullopt, {1})}),
                      /*seq=*/41);
    index_.MarkStale(2);
  }
  // The same image in format v1 (the release before): version 1, and no has_seq/applied_seq
  // after each worker's stale byte.
  static std::string ToV1(const std::string& v2) {
    auto get64 = [&](std::size_t at) {
      std::uint64_t v;
      std::memcpy(&v, v2.data() + at, 8);
      return v;
    };
    std::string out = v2.substr(0, 24);
    out[8] = 1;
    std::size_t at = 24;
    const std::uint64_t nodes = get64(at);
    out.append(v2, at, 8 + nodes * 17);
    at += 8 + nodes * 17;
    const std::uint64_t workers = get64(at);
    out.append(v2, at, 8);
    at += 8;
    for (std::uint64_t w = 0; w < workers; ++w) {
      out.append(v2, at, 5);  // id, stale
      at += 5 + 9;            // has_seq, applied_seq dropped
      const std::uint64_t hashes = get64(at);
      const std::uint64_t entries = get64(at + 8 + hashes * 20);
      const std::size_t n = 8 + hashes * 20 + 8 + entries * 16;
      out.append(v2, at, n);
      at += n;
    }
    EXPECT_EQ(at, v2.size() - 8);
    out.append(8, '\0');
    Reseal(&out);
    return out;
  }
  void ExpectSameLookups(const KvIndex& a, const KvIndex& b) {
    for (const auto& p : std::vector<std::vector<std::uint32_t>>{{1, 2, 3, 4}, {1, 2}, {1, 3}}) {
      auto keys = PromptKeys(keyer_, p);
      EXPECT_EQ(ByWorker(a.Lookup(keys)), ByWorker(b.Lookup(keys)));
    }
    auto lora = PromptKeys(keyer_, {1}, "lora-x");
    EXPECT_EQ(ByWorker(a.Lookup(lora)), ByWorker(b.Lookup(lora)));
  }
  static void Reseal(std::string* image) {  // recompute the checksum after an edit
    std::uint64_t sum = XXH3_64bits(image->data(), image->size() - 8);
    std::memcpy(image->data() + image->size() - 8, &sum, 8);
  }

  BlockKeyer keyer_;
  KvIndex index_{keyer_};
};

TEST_F(IndexSnapshotTest, RoundTripPreservesLookupsStatsAndRemovals) {
  KvIndex copy(keyer_);
  ASSERT_TRUE(copy.Restore(index_.Dump()).has_value());
  ExpectSameLookups(index_, copy);
  EXPECT_EQ(copy.stats().entries, index_.stats().entries);
  EXPECT_EQ(copy.stats().nodes, index_.stats().nodes);
  // The engine-hash maps came along: removals and continuations still resolve.
  index_.ApplyBatch(2, Batch({Remove({5}), Store({7}, 6, {3})}));
  copy.ApplyBatch(2, Batch({Remove({5}), Store({7}, 6, {3})}));
  ExpectSameLookups(index_, copy);
  EXPECT_EQ(copy.Dump(), index_.Dump());
}

TEST_F(IndexSnapshotTest, AppliedSequenceRoundTrips) {
  KvIndex copy(keyer_);
  ASSERT_TRUE(copy.Restore(index_.Dump()).has_value());
  EXPECT_EQ(copy.AppliedSeq(2), 41u);
  EXPECT_EQ(copy.AppliedSeq(1), std::nullopt);  // its batch came without one
  EXPECT_EQ(copy.Dump(), index_.Dump());
  // A replay of seq 41 is skipped in the copy as in the original.
  const auto again = Batch({Store({5}, std::nullopt, {1})});
  index_.ApplyBatch(2, again, 41);
  copy.ApplyBatch(2, again, 41);
  EXPECT_EQ(copy.counters().duplicate_batches, 1u);
  EXPECT_EQ(copy.Dump(), index_.Dump());
}

TEST_F(IndexSnapshotTest, VersionOneImagesAreStillReadWithoutSequences) {
  const std::string v2 = index_.Dump();
  const std::string v1 = ToV1(v2);
  ASSERT_EQ(v1.size(), v2.size() - 2 * 9);
  auto parsed = IndexSnapshot::Parse(v1, keyer_);
  ASSERT_TRUE(parsed.has_value()) << parsed.error();
  EXPECT_EQ(parsed->version(), 1u);
  EXPECT_EQ(parsed->applied_seq(2), std::nullopt);
  KvIndex copy(keyer_);
  ASSERT_TRUE(copy.Restore(v1).has_value());
  ExpectSameLookups(index_, copy);
  EXPECT_EQ(copy.AppliedSeq(2), std::nullopt);
  // Restored from v1 it dumps v2, equal to the original's but for the one sequence.
  KvIndex no_seq(keyer_);
  ASSERT_TRUE(no_seq.Restore(copy.Dump()).has_value());
  EXPECT_EQ(ToV1(copy.Dump()), v1);
}

TEST_F(IndexSnapshotTest, BadSequenceFlagIsRejected) {
  std::string image = index_.Dump();
  // The first worker's has_seq follows the nodes, the worker count, its id and stale byte.
  std::uint64_t nodes;
  std::memcpy(&nodes, image.data() + 24, 8);
  const std::size_t has_seq = 24 + 8 + nodes * 17 + 8 + 4 + 1;
  ASSERT_EQ(image[has_seq], 0);  // worker 1 has no sequence
  image[has_seq] = 2;
  Reseal(&image);
  EXPECT_FALSE(IndexSnapshot::Parse(image, keyer_).has_value());
  image[has_seq] = 0;
  image[has_seq + 1] = 7;  // a sequence without the flag
  Reseal(&image);
  EXPECT_FALSE(IndexSnapshot::Parse(image, keyer_).has_value());
}

TEST_F(IndexSnapshotTest, EveryFlippedByteIsRejectedAndLeavesIndexUnchanged) {
  const std::string image = index_.Dump();
  KvIndex target(keyer_);
  target.ApplyBatch(3, Batch({Store({1}, std::nullopt, {1})}));
  const std::string before = target.Dump();
  for (std::size_t i = 0; i < image.size(); ++i) {
    std::string bad = image;
    bad[i] ^= 0x20;
    auto r = target.Restore(bad);
    ASSERT_FALSE(r.has_value()) << "byte " << i;
  }
  EXPECT_EQ(target.Dump(), before);
}

TEST_F(IndexSnapshotTest, TruncatedImageIsRejected) {
  const std::string image = index_.Dump();
  KvIndex target(keyer_);
  for (std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{30}, image.size() - 1}) {
    EXPECT_FALSE(target.Restore(std::string_view(image).substr(0, n)).has_value()) << n;
  }
}

TEST_F(IndexSnapshotTest, UnknownVersionIsRejectedEvenWithValidChecksum) {
  std::string image = index_.Dump();
  image[8] = 3;  // version follows the 8-byte magic (1 and 2 are read)
  Reseal(&image);
  auto r = KvIndex(keyer_).Restore(image);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("version"), std::string::npos);
}

TEST_F(IndexSnapshotTest, InconsistentImageWithValidChecksumIsRejected) {
  std::string image = index_.Dump();
  // The first node record's parent flag follows the 32-byte header and its 8-byte key; point
  // it at a parent that does not exist.
  const std::size_t flag = 8 + 4 + 4 + 8 + 8 + 8;
  image[flag] = 1;
  std::memset(image.data() + flag + 1, 0x5A, 8);
  Reseal(&image);
  EXPECT_FALSE(KvIndex(keyer_).Restore(image).has_value());
}

TEST_F(IndexSnapshotTest, ImageFromDifferentBlockSizeIsRejected) {
  BlockKeyer other(32);
  EXPECT_FALSE(KvIndex(other).Restore(index_.Dump()).has_value());
}

}  // namespace
}  // namespace kvroute::kv
