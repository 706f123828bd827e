#include "sched/latency_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;
using testing::Worker;

constexpr int kGpu = 0, kCpu = 1, kDisk = 2, kShared = 3;

TEST(LayerHitsTest, EachTierCountsOnlyBlocksBeyondFasterTiers) {
  // GPU holds [0,10), CPU [0,15), DISK [0,12), SHARED [0,20) of 20 blocks.
  const LayeredHits h = LayerHits(View(1, 10, 15, 12, 20), 20);
  EXPECT_EQ(h.blocks[kGpu], 10u);
  EXPECT_EQ(h.blocks[kCpu], 5u);     // 15 - 10
  EXPECT_EQ(h.blocks[kDisk], 0u);    // 12 < 15: nothing new
  EXPECT_EQ(h.blocks[kShared], 5u);  // 20 - 15
  EXPECT_EQ(h.mixed_blocks, 0u);
  EXPECT_EQ(h.total(), 20u);
}

TEST(LayerHitsTest, AnyDepthBeyondEveryTierIsMixed) {
  CacheView v = View(1, 4, 2);
  v.any_depth_blocks = 9;  // blocks 4..8 alternate between tiers
  const LayeredHits h = LayerHits(v, 20);
  EXPECT_EQ(h.blocks[kGpu], 4u);
  EXPECT_EQ(h.mixed_blocks, 5u);
}

TEST(LayerHitsTest, DepthsAreClampedToTheRequestsBlocks) {
  const LayeredHits h = LayerHits(View(1, 50, 60), 20);
  EXPECT_EQ(h.blocks[kGpu], 20u);
  EXPECT_EQ(h.blocks[kCpu], 0u);
}

TEST(PlanLoadTest, TierWithoutBandwidthIsRecomputed) {
  WorkerSnapshot w = Worker(1);
  w.kv_bytes_per_block = 1e6;
  w.tier_load_bytes_per_s[kCpu] = 1e10;   // disk has no bandwidth: cannot load from it
  const RequestProfile r = Request(320);  // 20 blocks
  const LoadPlan p = PlanLoad(r, View(1, 5, 10, 20), w);
  EXPECT_EQ(p.load_blocks[kGpu], 5u);
  EXPECT_EQ(p.load_blocks[kCpu], 5u);
  EXPECT_EQ(p.load_blocks[kDisk], 0u);
  EXPECT_EQ(p.hit_blocks, 10u);
  EXPECT_EQ(p.uncached_tokens, 320u - 160u);
  EXPECT_DOUBLE_EQ(p.load_s, 5 * 1e6 / 1e10);
}

TEST(PlanLoadTest, MixedBlocksAreChargedAtTheSlowestLoadableTier) {
  WorkerSnapshot w = Worker(1);
  w.kv_bytes_per_block = 1e6;
  w.tier_load_bytes_per_s[kCpu] = 1e10;
  w.tier_load_bytes_per_s[kDisk] = 1e9;
  CacheView v = View(1, 2);
  v.any_depth_blocks = 6;  // 4 mixed blocks
  const LoadPlan p = PlanLoad(Request(320), v, w);
  EXPECT_EQ(p.load_blocks[kDisk], 4u);
  EXPECT_DOUBLE_EQ(p.load_s, 4 * 1e6 / 1e9);
}

// Host memory and disk reach the GPU over separate paths at the same time (the engine model
// waits for the slowest): 5 blocks from CPU at 10 GB/s and 4 from disk at 1 GB/s take the
// disk's 4 ms, not 4.5 ms.
TEST(PlanLoadTest, TiersLoadInParallelSoTheSlowestSetsTheWait) {
  WorkerSnapshot w = Worker(1);
  w.kv_bytes_per_block = 1e6;
  w.tier_load_bytes_per_s[kCpu] = 1e10;
  w.tier_load_bytes_per_s[kDisk] = 1e9;
  const LoadPlan p = PlanLoad(Request(320), View(1, 2, 7, 11), w);
  EXPECT_EQ(p.load_blocks[kCpu], 5u);
  EXPECT_EQ(p.load_blocks[kDisk], 4u);
  EXPECT_DOUBLE_EQ(p.load_s, 4 * 1e6 / 1e9);
}

TEST(PredictTtftTest, SumsQueueRecomputeAndTierLoad) {
  WorkerSnapshot w = Worker(1);
  w.prefill_tokens_per_s = 10000;
  w.pending_prefill_tokens = 5000;
  w.kv_bytes_per_block = 2e6;
  w.tier_load_bytes_per_s[kCpu] = 2e10;
  // 3200 tokens = 200 blocks; 100 on GPU, 50 more on CPU, 50 to recompute (800 tokens).
  auto p = PredictTtft(Request(3200), View(1, 100, 150), w);
  ASSERT_TRUE(p.has_value());
  EXPECT_DOUBLE_EQ(p->queue_s, 0.5);     // 5000 / 10000
  EXPECT_DOUBLE_EQ(p->prefill_s, 0.08);  // 800 / 10000
  EXPECT_DOUBLE_EQ(p->load_s, 0.005);    // 50 * 2e6 / 2e10
  EXPECT_DOUBLE_EQ(p->total_s(), 0.585);
}

TEST(PredictTtftTest, MissingPrefillRateIsAnErrorNamingIt) {
  auto p = PredictTtft(Request(320), View(1, 0), Worker(7));
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().find("prefill_tokens_per_s"), std::string::npos);
  EXPECT_NE(p.error().find("w7"), std::string::npos);
}

// The learned curve's attention share: a token attends to everything before it, so the
// same uncached tokens cost more behind a long cached prefix and a long prompt costs more
// per token than the rate quoted at one chunk (kPrefillRateReferenceTokens).
TEST(PrefillSecondsTest, AttentionShareMakesLongContextsCostMorePerToken) {
  WorkerSnapshot w = Worker(1);
  w.prefill_tokens_per_s = 10000;
  EXPECT_DOUBLE_EQ(*PrefillSeconds(w, 8192, 0), 0.8192);  // a line at q = 0
  EXPECT_DOUBLE_EQ(*PrefillSeconds(w, 2000, 30000), 0.2);
  w.prefill_attention_per_token = 1.0 / 65536;
  // At the reference length the quoted rate holds exactly.
  EXPECT_NEAR(*PrefillSeconds(w, 8192, 0), 0.8192, 1e-12);
  // (u + q(u² + 2uc)) / (rate (1 + q·8192)): 32768 tokens alone = 49152 / (10000 · 1.125).
  EXPECT_NEAR(*PrefillSeconds(w, 32768, 0), 49152.0 / 11250, 1e-12);
  // 2,000 new tokens behind 30,000 cached cost more than 2,000 alone.
  EXPECT_GT(*PrefillSeconds(w, 2000, 30000), *PrefillSeconds(w, 2000, 0));
  EXPECT_NEAR(*PrefillSeconds(w, 2000, 30000),
              (2000 + (2000.0 * 2000 + 2 * 2000.0 * 30000) / 65536) / 11250, 1e-12);
}

TEST(PrefillSecondsTest, AnUnusableShareIsAnErrorNamingTheWorker) {
  WorkerSnapshot w = Worker(3);
  w.prefill_tokens_per_s = 10000;
  for (double q : {std::nan(""), -1e-6, static_cast<double>(INFINITY)}) {
    w.prefill_attention_per_token = q;
    auto s = PrefillSeconds(w, 100, 0);
    ASSERT_FALSE(s.has_value()) << q;
    EXPECT_NE(s.error().find("prefill_attention_per_token"), std::string::npos);
    EXPECT_NE(s.error().find("w3"), std::string::npos);
    EXPECT_FALSE(PredictTtft(Request(320), View(3, 0), w).has_value());
  }
}

TEST(PredictItlTest, UsesBatchAndKvTokensAfterAddingTheRequest) {
  WorkerSnapshot w = Worker(1);
  w.inflight_requests = 9;
  w.active_kv_blocks = 100;
  w.decode_step = StepTimeModel{.base_s = 0.01, .per_sequence_s = 0.001, .per_kv_token_s = 1e-6};
  RequestProfile r = Request(320);
  r.predicted_output_tokens = 200;
  // batch 10; kv = 100*16 + (320 - 5*16) + 200 = 1600 + 240 + 200 = 2040 tokens
  // itl = 0.01 + 0.001*10 + 1e-6*2040 = 0.02204
  auto itl = PredictItl(r, View(1, 5), w);
  ASSERT_TRUE(itl.has_value());
  EXPECT_DOUBLE_EQ(*itl, 0.02204);
}

TEST(PrefixHitRatioTest, ShortPromptHasNoHit) {
  EXPECT_EQ(PrefixHitRatio(Request(10), View(1, 3)), 0.0);
  EXPECT_DOUBLE_EQ(PrefixHitRatio(Request(320), View(1, 5, 15)), 0.75);
}

}  // namespace
}  // namespace kvroute::sched
