// KeptSiblingSnapshot: a sibling's snapshot kept after start and merged into the live index
// worker by worker, by name, under this replica's ids, at most once per name and only while it
// is kept (replicas.warm_keep_s). The end-to-end case (etcd-discovered workers, two replicas)
// is tests/integration/etcd/etcd_test.py `warm_discovered`.
#include "gateway/replica_warm.h"

#include <gtest/gtest.h>

#include <thread>

#include "kv/index/index_test_util.h"

namespace kvroute::gateway {
namespace {

using kv::testing::Batch;
using kv::testing::ByWorker;
using kv::testing::PromptKeys;
using kv::testing::Store;

class KeptSiblingSnapshotTest : public ::testing::Test {
 protected:
  // The sibling knows w0 as id 0 (blocks {1, 2}, its feed's batch seq 7) and w1 as id 1
  // (block {3}, applied without a sequence).
  std::unique_ptr<KeptSiblingSnapshot> Kept(std::chrono::milliseconds keep) {
    kv::KvIndex sibling(keyer_);
    sibling.ApplyBatch(0, Batch({Store({101, 102}, std::nullopt, {1, 2})}), 7);
    sibling.ApplyBatch(1, Batch({Store({103}, std::nullopt, {3})}));
    auto parsed = kv::IndexSnapshot::Parse(sibling.Dump(), keyer_);
    EXPECT_TRUE(parsed.has_value());
    FetchedSnapshot f{.sibling = "http://sibling:1", .ids = {{"w0", 0}, {"w1", 1}},
                      .snapshot = *parsed};
    return std::make_unique<KeptSiblingSnapshot>(std::move(f), keep);
  }
  std::map<WorkerId, kv::WorkerMatch> Look(std::vector<std::uint32_t> p) {
    return ByWorker(index_.Lookup(PromptKeys(keyer_, p)));
  }

  kv::BlockKeyer keyer_;
  kv::KvIndex index_{keyer_};
};

TEST_F(KeptSiblingSnapshotTest, EachWorkerIsMergedByNameUnderOurId) {
  auto kept = Kept(std::chrono::seconds(30));
  index_.ApplyBatch(4, Batch({Store({401}, std::nullopt, {1})}));  // a live worker of ours
  EXPECT_EQ(kept->MergeWorker("w1", 9, index_), WarmMerge::kMerged);
  EXPECT_EQ(kept->MergeWorker("w0", 5, index_), WarmMerge::kMerged);
  EXPECT_EQ(Look({1, 2}).at(5).any_depth, 2u);
  EXPECT_EQ(Look({1, 2}).at(4).any_depth, 1u);
  EXPECT_FALSE(Look({1, 2}).contains(0));
  EXPECT_TRUE(Look({3}).contains(9));
  // The applied sequence comes with the blocks: w0's subscriber resumes after it.
  EXPECT_EQ(index_.AppliedSeq(5), 7u);
  EXPECT_EQ(index_.AppliedSeq(9), std::nullopt);
  const WarmCounters c = kept->counters();
  EXPECT_EQ(c.merged_workers, 2u);
  EXPECT_EQ(c.merged_blocks, 3u);
  EXPECT_EQ(c.with_seq, 1u);
  // Every worker it names was merged: nothing more can use it.
  EXPECT_FALSE(c.kept);
}

TEST_F(KeptSiblingSnapshotTest, ANewWorkerIsNotNamed) {
  auto kept = Kept(std::chrono::seconds(30));
  EXPECT_EQ(kept->MergeWorker("w7", 7, index_), WarmMerge::kNotNamed);
  EXPECT_EQ(index_.stats().workers, 0u);
  EXPECT_TRUE(kept->counters().kept);
}

TEST_F(KeptSiblingSnapshotTest, ANameIsMergedOnlyOnce) {
  // A worker that left and joined again may have another cache by now.
  auto kept = Kept(std::chrono::seconds(30));
  ASSERT_EQ(kept->MergeWorker("w0", 5, index_), WarmMerge::kMerged);
  index_.RemoveWorker(5);
  EXPECT_EQ(kept->MergeWorker("w0", 6, index_), WarmMerge::kTooLate);
  EXPECT_TRUE(Look({1, 2}).empty());
  EXPECT_EQ(kept->counters().too_late, 1u);
}

TEST_F(KeptSiblingSnapshotTest, AnIdHoldingBlocksIsRefused) {
  auto kept = Kept(std::chrono::seconds(30));
  index_.ApplyBatch(5, Batch({Store({501}, std::nullopt, {8})}));
  EXPECT_EQ(kept->MergeWorker("w0", 5, index_), WarmMerge::kRefused);
  EXPECT_TRUE(Look({1, 2}).empty());
  EXPECT_EQ(kept->counters().refused, 1u);
}

TEST_F(KeptSiblingSnapshotTest, KeepZeroDropsItAtArm) {
  auto kept = Kept(std::chrono::milliseconds(0));
  ASSERT_EQ(kept->MergeWorker("w0", 5, index_), WarmMerge::kMerged);  // a static join
  kept->Arm();
  EXPECT_FALSE(kept->counters().kept);
  EXPECT_EQ(kept->MergeWorker("w1", 9, index_), WarmMerge::kTooLate);  // discovered later
  EXPECT_TRUE(Look({3}).empty());
}

TEST_F(KeptSiblingSnapshotTest, ItIsDroppedWhenTheKeepWindowEnds) {
  auto kept = Kept(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_TRUE(kept->counters().kept);  // the window starts at Arm, after Start's joins
  kept->Arm();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (kept->counters().kept && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(kept->counters().kept);
  EXPECT_EQ(kept->MergeWorker("w0", 5, index_), WarmMerge::kTooLate);
  EXPECT_TRUE(Look({1, 2}).empty());
}

TEST_F(KeptSiblingSnapshotTest, DestroyedWhileArmedReturnsAtOnce) {
  auto kept = Kept(std::chrono::seconds(600));
  kept->Arm();
  const auto t0 = std::chrono::steady_clock::now();
  kept.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(FetchSiblingSnapshotTest, NoSiblingsIsNoSnapshot) {
  EXPECT_FALSE(FetchSiblingSnapshot(WarmOptions{}, kv::BlockKeyer()).has_value());
}

}  // namespace
}  // namespace kvroute::gateway
