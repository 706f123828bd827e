// A sibling's snapshot: the envelope round trip, and ids remapped by name before restoring.
#include "gateway/replica_snapshot.h"

#include <gtest/gtest.h>

#include "kv/index/index.h"
#include "kv/index/index_test_util.h"

namespace kvroute::gateway {
namespace {

using kv::testing::Batch;
using kv::testing::ByWorker;
using kv::testing::PromptKeys;
using kv::testing::Store;

// Worker 0 holds blocks {1, 2}; worker 1 holds {3}.
std::string SiblingImage() {
  kv::KvIndex index{kv::BlockKeyer(kv::kDefaultBlockSize)};
  index.ApplyBatch(0, Batch({Store({101, 102}, std::nullopt, {1, 2})}));
  index.ApplyBatch(1, Batch({Store({103}, std::nullopt, {3})}));
  return index.Dump();
}

TEST(ReplicaSnapshotTest, TheEnvelopeCarriesTheWorkerTableAndTheImage) {
  const std::string image = SiblingImage();
  auto decoded = DecodeSiblingSnapshot(EncodeSiblingSnapshot({{0, "w0"}, {1, "w1"}}, image));
  ASSERT_TRUE(decoded.has_value()) << decoded.error();
  ASSERT_EQ(decoded->workers.size(), 2u);
  EXPECT_EQ(decoded->workers[1].id, 1u);
  EXPECT_EQ(decoded->workers[1].name, "w1");
  EXPECT_EQ(decoded->image, image);
}

TEST(ReplicaSnapshotTest, ATruncatedOrForeignBodyIsAnError) {
  const std::string body = EncodeSiblingSnapshot({{0, "w0"}}, SiblingImage());
  EXPECT_FALSE(DecodeSiblingSnapshot(body.substr(0, body.size() - 1)).has_value());
  EXPECT_FALSE(DecodeSiblingSnapshot("{\"format\":\"other\"}\nxx").has_value());
  EXPECT_FALSE(DecodeSiblingSnapshot("no header line").has_value());
}

TEST(ReplicaSnapshotTest, RestoredUnderOurIdsWithUnknownWorkersDropped) {
  // Our replica knows the sibling's worker 0 as id 7 and has no worker 1.
  auto image = RemapSnapshotWorkers(SiblingImage(), {{0, 7}});
  ASSERT_TRUE(image.has_value()) << image.error();
  kv::KvIndex ours{kv::BlockKeyer(kv::kDefaultBlockSize)};
  auto restored = ours.Restore(*image);
  ASSERT_TRUE(restored.has_value()) << restored.error();
  const auto held = ByWorker(ours.Lookup(PromptKeys(ours.keyer(), {1, 2})));
  ASSERT_TRUE(held.contains(7));
  EXPECT_EQ(held.at(7).any_depth, 2u);
  EXPECT_FALSE(held.contains(0));
  EXPECT_TRUE(ByWorker(ours.Lookup(PromptKeys(ours.keyer(), {3}))).empty());
}

TEST(ReplicaSnapshotTest, SwappedIdsKeepEachWorkersBlocks) {
  auto image = RemapSnapshotWorkers(SiblingImage(), {{0, 1}, {1, 0}});
  ASSERT_TRUE(image.has_value()) << image.error();
  kv::KvIndex ours{kv::BlockKeyer(kv::kDefaultBlockSize)};
  ASSERT_TRUE(ours.Restore(*image).has_value());
  EXPECT_TRUE(ByWorker(ours.Lookup(PromptKeys(ours.keyer(), {1, 2}))).contains(1));
  EXPECT_TRUE(ByWorker(ours.Lookup(PromptKeys(ours.keyer(), {3}))).contains(0));
}

TEST(ReplicaSnapshotTest, BrokenFramingIsAnError) {
  const std::string image = SiblingImage();
  EXPECT_FALSE(RemapSnapshotWorkers(image.substr(0, 30), {{0, 0}}).has_value());
  EXPECT_FALSE(RemapSnapshotWorkers(image + "xxxxxxxx", {{0, 0}}).has_value());
}

}  // namespace
}  // namespace kvroute::gateway
