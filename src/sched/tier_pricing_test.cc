// Tier pricing: the shared store's depth reaches every worker, a tier's load time is its
// blocks' bytes over the worker's bandwidth and is compared with recomputing the same blocks,
// and the fixed-weight presets credit what Dynamo and llm-d credit.
#include "sched/tier_pricing.h"

#include <gtest/gtest.h>

#include "sched/latency_model.h"
#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;
using testing::Worker;

constexpr int kCpu = static_cast<int>(Tier::kCpu);
constexpr int kDisk = static_cast<int>(Tier::kDisk);
constexpr int kShared = static_cast<int>(Tier::kShared);

TEST(MergeSharedTierTest, TheStoresDepthBecomesEveryWorkersSharedDepth) {
  const std::vector<WorkerSnapshot> workers = {Worker(0), Worker(1), Worker(2)};
  std::vector<CacheView> views = {View(1, 2, 5), View(kSharedStoreWorker, 0, 0, 0, 8)};
  MergeSharedTier(workers, &views);
  ASSERT_EQ(views.size(), 3u);  // the store's own view is gone; workers 0 and 2 gained one
  for (const CacheView& v : views) {
    EXPECT_NE(v.worker, kSharedStoreWorker);
    EXPECT_EQ(v.depth_blocks[kShared], 8u) << v.worker;
    EXPECT_EQ(v.any_depth_blocks, 8u) << v.worker;
  }
  // Sorted by worker; worker 1's own tiers are kept: GPU 2, CPU 5 are still only its.
  EXPECT_EQ(views[0].worker, 0u);
  EXPECT_EQ(views[1].worker, 1u);
  EXPECT_EQ(views[1].depth_blocks[0], 2u);
  EXPECT_EQ(views[1].depth_blocks[kCpu], 5u);
  EXPECT_EQ(views[0].depth_blocks[kCpu], 0u);
}

TEST(MergeSharedTierTest, WithoutAStoreViewNothingChanges) {
  const std::vector<WorkerSnapshot> workers = {Worker(0), Worker(1)};
  std::vector<CacheView> views = {View(1, 3)};
  MergeSharedTier(workers, &views);
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].depth_blocks[kShared], 0u);
}

WorkerSnapshot Priced(WorkerId id) {
  WorkerSnapshot w = Worker(id);
  w.prefill_tokens_per_s = 10'000;  // 16-token block: 1.6 ms to recompute
  w.kv_bytes_per_block = 4e6;
  w.tier_load_bytes_per_s[kCpu] = 20e9;    // 0.2 ms per block
  w.tier_load_bytes_per_s[kDisk] = 4e9;    // 1 ms
  w.tier_load_bytes_per_s[kShared] = 2e9;  // 2 ms: dearer than recompute at this rate
  return w;
}

TEST(PriceTiersTest, EachTierIsChargedItsBytesOverItsBandwidthAgainstRecompute) {
  const RequestProfile r = Request(16 * 10);
  const CacheView v = View(0, 2, 4, 6, 8);  // layered: 2 GPU, 2 CPU, 2 disk, 2 shared
  auto p = PriceTiers(r, v, Priced(0));
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_EQ(p->blocks, (std::array<std::uint32_t, kNumTiers>{2, 2, 2, 2}));
  EXPECT_DOUBLE_EQ(p->load_s[0], 0);
  EXPECT_DOUBLE_EQ(p->load_s[kCpu], 2 * 4e6 / 20e9);
  EXPECT_DOUBLE_EQ(p->load_s[kDisk], 2 * 4e6 / 4e9);
  EXPECT_DOUBLE_EQ(p->load_s[kShared], 2 * 4e6 / 2e9);
  // At attention share 0 recompute is tokens / rate whatever the position.
  for (int t = 0; t < kNumTiers; ++t) EXPECT_DOUBLE_EQ(p->recompute_s[t], 32 / 10'000.0) << t;
  EXPECT_LT(p->load_s[kCpu], p->recompute_s[kCpu]);
  EXPECT_GT(p->load_s[kShared], p->recompute_s[kShared]);
  // PredictTtft charges exactly these load seconds.
  auto ttft = PredictTtft(r, v, Priced(0));
  ASSERT_TRUE(ttft.has_value()) << ttft.error();
  EXPECT_DOUBLE_EQ(ttft->load_s, p->load_wait_s());
}

TEST(PriceTiersTest, ASharedBlockCostsTheSameOnEveryWorkerAHostBlockOnlyOnItsHolder) {
  const RequestProfile r = Request(16 * 9);
  const std::vector<WorkerSnapshot> workers = {Priced(0), Priced(1)};
  std::vector<CacheView> views = {View(0, 0, 8), View(kSharedStoreWorker, 0, 0, 0, 8)};
  MergeSharedTier(workers, &views);
  ASSERT_EQ(views.size(), 2u);
  auto holder = PriceTiers(r, views[0], workers[0]);
  auto other = PriceTiers(r, views[1], workers[1]);
  ASSERT_TRUE(holder && other);
  // Worker 0 reads its host copy (cheap); worker 1 only has the store's.
  EXPECT_EQ(holder->blocks[kCpu], 8u);
  EXPECT_EQ(holder->blocks[kShared], 0u);
  EXPECT_EQ(other->blocks[kShared], 8u);
  EXPECT_LT(holder->load_wait_s(), other->load_wait_s());
}

TEST(PriceTiersTest, AWorkerThatCannotLoadATierRecomputesIt) {
  WorkerSnapshot w = Priced(0);
  w.tier_load_bytes_per_s[kShared].reset();
  auto p = PriceTiers(Request(16 * 5), View(0, 0, 0, 0, 4), w);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->blocks[kShared], 0u);
  EXPECT_DOUBLE_EQ(p->load_wait_s(), 0);
}

TEST(PriceTiersTest, NoPrefillRateIsAnError) {
  WorkerSnapshot w = Priced(0);
  w.prefill_tokens_per_s.reset();
  EXPECT_FALSE(PriceTiers(Request(64), View(0, 1, 2), w).has_value());
}

TEST(TierWeightsTest, PresetsCreditWhatDynamoAndLlmdCredit) {
  const CacheView v = View(0, 2, 4, 6, 8);  // 2 blocks in each tier, layered
  EXPECT_DOUBLE_EQ(WeightedHitBlocks(v, 10, kDynamoKvbmWeights), 2 * (1 + 0.75 + 0.25 + 0.5));
  EXPECT_DOUBLE_EQ(WeightedHitBlocks(v, 10, kLlmdTierWeights), 2 * (1 + 0.8));
  // Blocks beyond the prompt's full blocks are not credited.
  EXPECT_DOUBLE_EQ(WeightedHitBlocks(v, 3, kDynamoKvbmWeights), 2 + 0.75);
}

}  // namespace
}  // namespace kvroute::sched
