// Snapshot: round trip, and rejection of corrupt or foreign images without changing the index.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>

#include "kv/index/index.h"
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
                      Batch({Store({5, 6}, std::nullopt, {1, 2}), Store({5}, std::nullopt, {1})}));
    index_.MarkStale(2);
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
  image[8] = 2;  // version follows the 8-byte magic
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
