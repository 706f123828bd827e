// RouterLoad: the gateway's LoadTracker and RateLearner as the simulator calls them, and the
// snapshot fields they fill (refreshed only for workers that changed).
#include "simulate/router_load.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/step_time.h"

namespace kvroute::simulate {
namespace {

using std::chrono::milliseconds;

engine::Profile TestProfile() {
  auto p = engine::LoadProfile(engine::kDefaultProfileName);
  EXPECT_TRUE(p.has_value());
  return p.value_or(engine::Profile{});
}

gateway::RoutedRequest Routed(WorkerId w, std::uint64_t prompt, std::uint64_t uncached,
                              std::uint64_t blocks) {
  return {.worker = w, .prompt_tokens = prompt, .uncached_tokens = uncached, .kv_blocks = blocks};
}

TEST(RouterLoadTest, FillCopiesTheTrackersLoadAndTheSeededRates) {
  RouterLoad router;
  const engine::Profile profile = TestProfile();
  ASSERT_TRUE(router.AddWorker(0, profile, 16).has_value());
  router.OnRouted(7, Routed(0, 1000, 600, 70), Nanos(0));
  sched::WorkerSnapshot s;
  router.Fill(0, Nanos(0), &s);
  EXPECT_EQ(s.inflight_requests, 1u);
  EXPECT_EQ(s.pending_prefill_tokens, 600u);
  EXPECT_EQ(s.active_kv_blocks, 70u);
  const auto seed = gateway::SeedFromProfile(profile);
  ASSERT_TRUE(seed.has_value());
  ASSERT_TRUE(s.prefill_tokens_per_s.has_value());
  // The seed's rate, quoted at the reference prompt length (gateway/rate_learner.h).
  const double seed_rate = gateway::kRateReferenceTokens /
                           (seed->prefill_s_per_token * gateway::kRateReferenceTokens +
                            seed->prefill_s_per_token_sq * gateway::kRateReferenceTokens *
                                gateway::kRateReferenceTokens);
  EXPECT_NEAR(*s.prefill_tokens_per_s, seed_rate, 1e-9 * *s.prefill_tokens_per_s);
  ASSERT_TRUE(s.decode_step.has_value());
  EXPECT_DOUBLE_EQ(s.decode_step->base_s, seed->decode.base_s);
  EXPECT_DOUBLE_EQ(*s.kv_bytes_per_block,
                   engine::StepTimeModel(profile).KvBytesPerTokenTransfer() * 16);
}

TEST(RouterLoadTest, FillSeesEveryChangeOfTheWorkerItFills) {
  RouterLoad router;
  const engine::Profile profile = TestProfile();
  ASSERT_TRUE(router.AddWorker(0, profile, 16).has_value());
  ASSERT_TRUE(router.AddWorker(1, profile, 16).has_value());
  sched::WorkerSnapshot s0, s1;
  router.OnRouted(1, Routed(0, 2048, 2048, 130), Nanos(0));
  router.Fill(0, Nanos(0), &s0);
  router.Fill(1, Nanos(0), &s1);
  EXPECT_EQ(s0.inflight_requests, 1u);
  EXPECT_EQ(s1.inflight_requests, 0u);
  const double seeded_rate = *s0.prefill_tokens_per_s;
  // A slow first token: the prefill estimate moves, the pending tokens are gone.
  router.OnFirstToken(1, 0, milliseconds(2000));
  router.Fill(0, Nanos(0), &s0);
  EXPECT_EQ(s0.pending_prefill_tokens, 0u);
  EXPECT_LT(*s0.prefill_tokens_per_s, seeded_rate);
  router.OnToken(1, 0, milliseconds(2030));
  router.OnDone(1, 0, milliseconds(2030), true);
  router.Fill(0, Nanos(0), &s0);
  EXPECT_EQ(s0.inflight_requests, 0u);
  EXPECT_EQ(s0.active_kv_blocks, 0u);
  EXPECT_EQ(router.learner().Estimate(0)->prefill_samples, 1u);
}

TEST(RouterLoadTest, ForgettingAWorkerDropsItsLoadAndKeepsItsLearnedRates) {
  RouterLoad router;
  ASSERT_TRUE(router.AddWorker(0, TestProfile(), 16).has_value());
  router.OnRouted(1, Routed(0, 4096, 4096, 260), Nanos(0));
  router.OnFirstToken(1, 0, milliseconds(3000));
  router.OnRouted(2, Routed(0, 512, 512, 40), milliseconds(3000));
  sched::WorkerSnapshot s;
  router.Fill(0, Nanos(0), &s);
  const double learned = *s.prefill_tokens_per_s;
  router.ForgetWorker(0);
  router.OnDone(2, 0, milliseconds(3100), false);  // a late call for a forgotten request
  router.Fill(0, Nanos(0), &s);
  EXPECT_EQ(s.inflight_requests, 0u);
  EXPECT_EQ(s.pending_prefill_tokens, 0u);
  EXPECT_EQ(s.active_kv_blocks, 0u);
  EXPECT_DOUBLE_EQ(*s.prefill_tokens_per_s, learned);
  EXPECT_EQ(router.tracker().inflight(), 0u);
}

// As WorkerRegistry::Snapshot: identical workers' scattered prefill estimates are shrunk
// toward their pooled rate (gateway::ShrinkTowardPeers, prior 100 samples).
TEST(RouterLoadTest, FillShrinksScatteredPrefillRatesTowardThePeersAsTheRegistryDoes) {
  RouterLoad router;
  ASSERT_TRUE(router.AddWorker(0, TestProfile(), 16).has_value());
  ASSERT_TRUE(router.AddWorker(1, TestProfile(), 16).has_value());
  sched::WorkerSnapshot s0, s1;
  router.Fill(0, Nanos(0), &s0);
  const double seed_rate = *s0.prefill_tokens_per_s;
  std::uint64_t id = 0;
  Nanos now(0);
  for (int i = 0; i < 50; ++i) {  // worker 0 measured 1.2x faster than worker 1 by 1.44
    for (WorkerId w : {WorkerId{0}, WorkerId{1}}) {
      const double rate = w == 0 ? 1.2 * seed_rate : seed_rate / 1.2;
      router.OnRouted(++id, Routed(w, 4096, 4096, 260), now);
      router.OnFirstToken(id, w, now + FromSeconds(4096 / rate));
      router.OnDone(id, w, now + FromSeconds(4096 / rate), true);
    }
    now += std::chrono::seconds(1);
  }
  const double own0 = router.learner().Estimate(0)->prefill_tokens_per_s;
  const double own1 = router.learner().Estimate(1)->prefill_tokens_per_s;
  router.Fill(0, Nanos(0), &s0);
  router.Fill(1, Nanos(0), &s1);
  // 50 own samples against a prior of 100: a third of the log spread is left.
  EXPECT_GT(own0 / own1, 1.3);
  EXPECT_NEAR(std::log(*s0.prefill_tokens_per_s / *s1.prefill_tokens_per_s),
              std::log(own0 / own1) / 3, 0.01);
  const double pool = 100.0 / (50 / own0 + 50 / own1);
  EXPECT_NEAR(*s0.prefill_tokens_per_s, gateway::ShrinkTowardPeers(own0, 50, pool, 100), 1e-6);
}

// As WorkerRegistry::Snapshot: a worker with fewer than 10 decode samples of its own is lent
// its same-profile peers' learned decode model (the sample-weighted mean of those with 10 or
// more); before any peer has that many, every worker keeps its own (seeded) model.
TEST(RouterLoadTest, FillLendsAWorkerWithFewDecodeSamplesItsPeersDecodeModel) {
  RouterLoad router;
  ASSERT_TRUE(router.AddWorker(0, TestProfile(), 16).has_value());
  ASSERT_TRUE(router.AddWorker(1, TestProfile(), 16).has_value());
  sched::WorkerSnapshot s0, s1;
  router.Fill(1, Nanos(0), &s1);
  const sched::StepTimeModel seed = *s1.decode_step;
  // Worker 0 decodes 40 tokens at twice the seed's batch-1 step time.
  const double itl = 2 * seed.Seconds(1, 4096);
  Nanos now(0);
  router.OnRouted(1, Routed(0, 4096, 4096, 260), now);
  now += std::chrono::seconds(1);
  router.OnFirstToken(1, 0, now);
  for (int k = 0; k < 40; ++k) {
    now += FromSeconds(itl);
    router.OnToken(1, 0, now);
  }
  router.OnDone(1, 0, now, true);
  const auto learned = router.learner().Estimate(0);
  ASSERT_TRUE(learned.has_value());
  ASSERT_GE(learned->decode_samples, 10u);
  ASSERT_LT(router.learner().Estimate(1)->decode_samples, 10u);
  router.Fill(0, Nanos(0), &s0);
  router.Fill(1, Nanos(0), &s1);
  EXPECT_DOUBLE_EQ(s0.decode_step->Seconds(1, 4096), learned->decode.Seconds(1, 4096));
  EXPECT_NEAR(s1.decode_step->Seconds(1, 4096), learned->decode.Seconds(1, 4096), 1e-12);
  EXPECT_GT(s1.decode_step->Seconds(1, 4096), 1.2 * seed.Seconds(1, 4096));
}

}  // namespace
}  // namespace kvroute::simulate
