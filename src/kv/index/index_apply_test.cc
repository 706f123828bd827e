// Event application: dual keys, reference counts, filters and counters.
#include <gtest/gtest.h>

#include "kv/index/index.h"
#include "kv/index/index_test_util.h"

namespace kvroute::kv {
namespace {

using testing::Batch;
using testing::ByWorker;
using testing::Match;
using testing::PromptKeys;
using testing::Remove;
using testing::Store;

class IndexApplyTest : public ::testing::Test {
 protected:
  std::map<WorkerId, WorkerMatch> Look(const std::vector<std::uint32_t>& contents,
                                       const std::string& lora = "") {
    return ByWorker(index_.Lookup(PromptKeys(keyer_, contents, lora)));
  }
  BlockKeyer keyer_;
  KvIndex index_{keyer_};
};

TEST_F(IndexApplyTest, StoredRunIsKeyedFromTokensNotEngineHashes) {
  index_.ApplyBatch(1, Batch({Store({901, 902, 903}, std::nullopt, {1, 2, 3})}));
  auto m = Look({1, 2, 3, 4});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[1], Match(1, 3, 3, 3, 3, 3));
}

TEST_F(IndexApplyTest, ContinuationRunChainsFromParentHashMapping) {
  index_.ApplyBatch(1, Batch({Store({901}, std::nullopt, {1}), Store({902, 903}, 901, {2, 3})}));
  EXPECT_EQ(Look({1, 2, 3})[1], Match(1, 3, 3, 3, 3, 3));
}

TEST_F(IndexApplyTest, RunWithUnknownParentIsSkippedAndCounted) {
  index_.ApplyBatch(1, Batch({Store({902, 903}, 777, {2, 3})}));
  EXPECT_TRUE(index_.Lookup(PromptKeys(keyer_, {2, 3})).empty());
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  EXPECT_EQ(index_.counters().unknown_parent_blocks, 2u);
  EXPECT_EQ(index_.stats().nodes, 0u);
}

TEST_F(IndexApplyTest, DuplicateStoreStaysUntilRemovedAsOftenAsStored) {
  index_.ApplyBatch(1, Batch({Store({901}, std::nullopt, {1}), Store({901}, std::nullopt, {1})}));
  index_.ApplyBatch(1, Batch({Remove({901})}));
  EXPECT_EQ(Look({1})[1].depth[0], 1u);
  index_.ApplyBatch(1, Batch({Remove({901})}));
  EXPECT_TRUE(Look({1}).empty());
}

TEST_F(IndexApplyTest, RemovalOfUnknownHashIsCountedAndIgnored) {
  index_.ApplyBatch(1, Batch({Store({901}, std::nullopt, {1}), Remove({555})}));
  EXPECT_EQ(index_.counters().unknown_removals, 1u);
  EXPECT_EQ(Look({1})[1].depth[0], 1u);
}

TEST_F(IndexApplyTest, RemovalFromTierNotHoldingTheBlockIsCountedAndIgnored) {
  index_.ApplyBatch(1, Batch({Store({901}, std::nullopt, {1}, "GPU"), Remove({901}, "CPU")}));
  EXPECT_EQ(index_.counters().unknown_removals, 1u);
  EXPECT_EQ(Look({1})[1].depth[0], 1u);
}

TEST_F(IndexApplyTest, AllBlocksClearedDropsEveryTierOfThatWorkerOnly) {
  index_.ApplyBatch(1, Batch({Store({1}, std::nullopt, {1}, "GPU"),
                              Store({1}, std::nullopt, {1}, "CPU"), Store({2}, 1, {2}, "DISK")}));
  index_.ApplyBatch(2, Batch({Store({1}, std::nullopt, {1})}));
  index_.ApplyBatch(1, Batch({AllBlocksCleared{}}));
  auto m = Look({1, 2});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m.count(2), 1u);
  EXPECT_EQ(index_.counters().clears, 1u);
}

TEST_F(IndexApplyTest, MediumSelectsTheTier) {
  index_.ApplyBatch(
      1, Batch({Store({1, 2}, std::nullopt, {1, 2}, "GPU"),
                Store({1, 2, 3}, std::nullopt, {1, 2, 3}, "cpu"),
                Store({1}, std::nullopt, {1}, "DISK"), Store({1}, std::nullopt, {1}, "SHARED")}));
  EXPECT_EQ(Look({1, 2, 3})[1], Match(1, 2, 3, 3, 3, 3));
}

TEST_F(IndexApplyTest, MissingMediumMeansGpu) {
  BlockStored s = Store({1}, std::nullopt, {1});
  s.medium.reset();
  index_.ApplyBatch(1, Batch({s}));
  EXPECT_EQ(Look({1})[1].depth[0], 1u);
}

// The apply path matches "GPU", "CPU" and a missing medium itself before TierFromMedium:
// other spellings of the same tier must still name the same tier.
TEST_F(IndexApplyTest, SpellingsOfOneMediumNameOneTier) {
  BlockStored gpu = Store({1}, std::nullopt, {1}, "gpu");
  BlockRemoved gpu_removed = Remove({1});
  gpu_removed.medium.reset();
  index_.ApplyBatch(1, Batch({Store({2}, std::nullopt, {2}, "CPU"), gpu}));
  EXPECT_EQ(Look({2})[1], Match(1, 0, 1, 1, 1, 1));
  EXPECT_EQ(Look({1})[1], Match(1, 1, 1, 1, 1, 1));
  index_.ApplyBatch(1, Batch({Remove({2}, "cpu"), gpu_removed}));
  EXPECT_TRUE(Look({1}).empty());
  EXPECT_TRUE(Look({2}).empty());
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
}

TEST_F(IndexApplyTest, UnknownMediumIsCountedAndSkipped) {
  index_.ApplyBatch(1, Batch({Store({1}, std::nullopt, {1}, "TAPE"), Remove({1}, "TAPE")}));
  EXPECT_TRUE(Look({1}).empty());
  EXPECT_EQ(index_.counters().unknown_medium, 2u);
}

TEST_F(IndexApplyTest, NonMainKvCacheGroupsAreIgnored) {
  BlockStored other_group = Store({1}, std::nullopt, {1});
  other_group.group_idx = 1;
  BlockStored sliding = Store({2}, std::nullopt, {2});
  sliding.kv_cache_spec_kind = "sliding_window";
  BlockStored main_group = Store({3}, std::nullopt, {3});
  main_group.group_idx = 0;
  main_group.kv_cache_spec_kind = "full_attention";
  BlockRemoved removed = Remove({3});
  removed.group_idx = 1;
  index_.ApplyBatch(1, Batch({other_group, sliding, main_group, removed}));
  EXPECT_TRUE(Look({1}).empty());
  EXPECT_TRUE(Look({2}).empty());
  EXPECT_EQ(Look({3})[1].depth[0], 1u);
  EXPECT_EQ(index_.counters().ignored_group, 3u);
}

TEST_F(IndexApplyTest, LoraNameEntersTheRoot) {
  index_.ApplyBatch(1, Batch({Store({1, 2}, std::nullopt, {1, 2}, "GPU", "sql-adapter")}));
  EXPECT_TRUE(Look({1, 2}).empty());
  EXPECT_EQ(Look({1, 2}, "sql-adapter")[1].depth[0], 2u);
}

TEST_F(IndexApplyTest, BlockSizeMismatchIsCountedAndReported) {
  BlockStored s = Store({1}, std::nullopt, {1});
  s.block_size = 32;
  s.token_ids.resize(32, 0);
  index_.ApplyBatch(1, Batch({s}));
  EXPECT_EQ(index_.counters().block_size_mismatch, 1u);
  EXPECT_EQ(index_.counters().last_event_block_size, 32u);
  EXPECT_EQ(index_.stats().nodes, 0u);
}

TEST_F(IndexApplyTest, TokenCountNotMatchingBlocksIsMalformed) {
  BlockStored s = Store({1, 2}, std::nullopt, {1});
  index_.ApplyBatch(1, Batch({s}));
  EXPECT_EQ(index_.counters().malformed, 1u);
  EXPECT_TRUE(Look({1}).empty());
}

TEST_F(IndexApplyTest, SaltedHashesOfSameTokensShareOneCanonicalBlock) {
  // Two requests with different cache_salt: different engine hashes, same tokens.
  index_.ApplyBatch(1, Batch({Store({11}, std::nullopt, {1}), Store({21}, std::nullopt, {1})}));
  EXPECT_EQ(index_.stats().nodes, 1u);
  index_.ApplyBatch(1, Batch({Remove({11})}));
  EXPECT_EQ(Look({1})[1].depth[0], 1u);
  index_.ApplyBatch(1, Batch({Remove({21})}));
  EXPECT_TRUE(Look({1}).empty());
}

TEST_F(IndexApplyTest, EngineHashReusedForOtherContentIsAConflict) {
  index_.ApplyBatch(1,
                    Batch({Store({11}, std::nullopt, {1}), Store({11, 12}, std::nullopt, {5, 6})}));
  EXPECT_EQ(index_.counters().hash_conflicts, 1u);
  EXPECT_TRUE(Look({5}).empty());
  EXPECT_EQ(Look({1})[1].depth[0], 1u);
}

TEST_F(IndexApplyTest, RemovingEverythingFreesAllNodes) {
  index_.ApplyBatch(1,
                    Batch({Store({1, 2, 3}, std::nullopt, {1, 2, 3}), Store({4}, 2, {9}, "CPU")}));
  index_.ApplyBatch(2, Batch({Store({7, 8}, std::nullopt, {1, 2})}));
  EXPECT_EQ(index_.stats().nodes, 4u);
  EXPECT_EQ(index_.stats().entries, 6u);
  index_.ApplyBatch(1, Batch({Remove({1, 2, 3}), Remove({4}, "CPU")}));
  index_.RemoveWorker(2);
  IndexStats s = index_.stats();
  EXPECT_EQ(s.nodes, 0u);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.engine_hashes, 0u);
  EXPECT_EQ(s.workers, 1u);
}

TEST_F(IndexApplyTest, RemoveWorkerForgetsOnlyThatWorker) {
  index_.ApplyBatch(1, Batch({Store({1, 2}, std::nullopt, {1, 2})}));
  index_.ApplyBatch(2, Batch({Store({1}, std::nullopt, {1})}));
  index_.RemoveWorker(1);
  auto m = Look({1, 2});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[2].depth[0], 1u);
}

TEST_F(IndexApplyTest, ReaddedWorkerStartsEmpty) {
  index_.ApplyBatch(1, Batch({Store({1, 2}, std::nullopt, {1, 2})}));
  index_.RemoveWorker(1);
  index_.ApplyBatch(1, Batch({Store({2}, 1, {2})}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  EXPECT_TRUE(Look({1, 2}).empty());
}

TEST_F(IndexApplyTest, StaleFlagFollowsMarkAndClear) {
  index_.ApplyBatch(1, Batch({Store({1}, std::nullopt, {1})}));
  index_.MarkStale(1);
  EXPECT_TRUE(Look({1})[1].stale);
  index_.ClearStale(1);
  EXPECT_FALSE(Look({1})[1].stale);
}

TEST_F(IndexApplyTest, AllBlocksClearedEndsStaleness) {
  index_.MarkStale(1);
  index_.ApplyBatch(1, Batch({AllBlocksCleared{}, Store({1}, std::nullopt, {1})}));
  EXPECT_FALSE(Look({1})[1].stale);
}

// An engine that hashes blocks as kvroute does (engine hash == canonical key): the index
// keeps no engine map for it, and parents, removals and counts resolve through the keys.
class IndexKeyedHashesTest : public IndexApplyTest {
 protected:
  std::vector<EngineHash> Keys(const std::vector<std::uint32_t>& contents) {
    return PromptKeys(keyer_, contents);
  }
};

TEST_F(IndexKeyedHashesTest, ParentsRemovalsAndCountsResolveThroughTheKeys) {
  const auto k = Keys({1, 2, 3, 4});
  index_.ApplyBatch(1, Batch({Store({k[0], k[1]}, std::nullopt, {1, 2}),
                              Store({k[2], k[3]}, k[1], {3, 4}), Store({k[3]}, k[2], {4})}));
  EXPECT_EQ(Look({1, 2, 3, 4})[1], Match(1, 4, 4, 4, 4, 4));
  EXPECT_EQ(index_.stats().engine_hashes, 4u);
  // k[3] was stored twice: one removal keeps it, the second drops it.
  index_.ApplyBatch(1, Batch({Remove({k[3]})}));
  EXPECT_EQ(Look({1, 2, 3, 4})[1].depth[0], 4u);
  index_.ApplyBatch(1, Batch({Remove({k[3]}), Remove({k[3]})}));
  EXPECT_EQ(Look({1, 2, 3, 4})[1].depth[0], 3u);
  EXPECT_EQ(index_.counters().unknown_removals, 1u);
  EXPECT_EQ(index_.counters().blocks_removed, 2u);
}

TEST_F(IndexKeyedHashesTest, AnEvictedParentIsUnknownWhileItsChildIsHeld) {
  const auto k = Keys({1, 2, 3});
  index_.ApplyBatch(1, Batch({Store({k[0], k[1]}, std::nullopt, {1, 2}), Remove({k[0]})}));
  // k[0] is now only a hole under k[1]: not a mapped hash, so not a parent.
  index_.ApplyBatch(1, Batch({Store({k[1]}, k[0], {2}, "CPU")}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  index_.ApplyBatch(1, Batch({Store({k[2]}, k[1], {3})}));
  EXPECT_EQ(index_.stats().engine_hashes, 2u);
}

TEST_F(IndexKeyedHashesTest, AnotherWorkersKeyIsNotThisWorkersHash) {
  const auto k = Keys({1, 2});
  index_.ApplyBatch(1, Batch({Store({k[0], k[1]}, std::nullopt, {1, 2})}));
  // Worker 2 never stored k[0]: as a parent it is unknown, as a removal too.
  index_.ApplyBatch(2, Batch({Store({k[1]}, k[0], {2}), Remove({k[0]})}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  EXPECT_EQ(index_.counters().unknown_removals, 1u);
  EXPECT_EQ(Look({1, 2}).count(2), 0u);
  EXPECT_EQ(Look({1, 2})[1].depth[0], 2u);
}

TEST_F(IndexKeyedHashesTest, FirstHashDifferingFromItsKeySwitchesToAMapKeepingEverything) {
  const auto k = Keys({1, 2, 3});
  index_.ApplyBatch(
      1, Batch({Store({k[0], k[1]}, std::nullopt, {1, 2}), Store({k[1]}, k[0], {2}, "CPU")}));
  // An engine-specific hash (e.g. a salted one) continues the keyed chain.
  index_.ApplyBatch(1, Batch({Store({777}, k[1], {3})}));
  EXPECT_EQ(Look({1, 2, 3})[1], Match(1, 3, 3, 3, 3, 3));  // CPU lacks block 0
  EXPECT_EQ(index_.stats().engine_hashes, 3u);
  // The keyed mappings kept their counts across the switch: k[1] has two references.
  index_.ApplyBatch(1, Batch({Remove({k[1]}, "CPU"), Remove({777})}));
  EXPECT_EQ(Look({1, 2, 3})[1], Match(1, 2, 2, 2, 2, 2));
  index_.ApplyBatch(1, Batch({Remove({k[1]}), Remove({k[0]})}));
  EXPECT_TRUE(Look({1, 2, 3}).empty());
  EXPECT_EQ(index_.stats().engine_hashes, 0u);
  EXPECT_EQ(index_.stats().nodes, 0u);
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
}

TEST_F(IndexKeyedHashesTest, AClearEndsTheMapAndLetsKeyedHashesBeKeptWithoutOne) {
  const auto k = Keys({1, 2});
  index_.ApplyBatch(1, Batch({Store({5, 6}, std::nullopt, {1, 2})}));
  index_.ApplyBatch(1, Batch({AllBlocksCleared{}, Store({k[0], k[1]}, std::nullopt, {1, 2})}));
  EXPECT_EQ(Look({1, 2})[1].depth[0], 2u);
  index_.ApplyBatch(1, Batch({AllBlocksCleared{}}));
  EXPECT_TRUE(Look({1, 2}).empty());
  EXPECT_EQ(index_.stats().nodes, 0u);
  EXPECT_EQ(index_.stats().engine_hashes, 0u);
}

}  // namespace
}  // namespace kvroute::kv
