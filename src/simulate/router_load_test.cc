// RouterLoad: the gateway's LoadTracker and RateLearner as the simulator calls them, and the
// snapshot fields they fill (refreshed only for workers that changed).
#include "simulate/router_load.h"

#include <gtest/gtest.h>

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
  router.Fill(0, &s);
  EXPECT_EQ(s.inflight_requests, 1u);
  EXPECT_EQ(s.pending_prefill_tokens, 600u);
  EXPECT_EQ(s.active_kv_blocks, 70u);
  const auto seed = gateway::SeedFromProfile(profile);
  ASSERT_TRUE(seed.has_value());
  ASSERT_TRUE(s.prefill_tokens_per_s.has_value());
  EXPECT_NEAR(*s.prefill_tokens_per_s, 1.0 / seed->prefill_s_per_token,
              1e-9 * *s.prefill_tokens_per_s);
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
  router.Fill(0, &s0);
  router.Fill(1, &s1);
  EXPECT_EQ(s0.inflight_requests, 1u);
  EXPECT_EQ(s1.inflight_requests, 0u);
  const double seeded_rate = *s0.prefill_tokens_per_s;
  // A slow first token: the prefill estimate moves, the pending tokens are gone.
  router.OnFirstToken(1, 0, milliseconds(2000));
  router.Fill(0, &s0);
  EXPECT_EQ(s0.pending_prefill_tokens, 0u);
  EXPECT_LT(*s0.prefill_tokens_per_s, seeded_rate);
  router.OnToken(1, 0, milliseconds(2030));
  router.OnDone(1, 0, milliseconds(2030), true);
  router.Fill(0, &s0);
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
  router.Fill(0, &s);
  const double learned = *s.prefill_tokens_per_s;
  router.ForgetWorker(0);
  router.OnDone(2, 0, milliseconds(3100), false);  // a late call for a forgotten request
  router.Fill(0, &s);
  EXPECT_EQ(s.inflight_requests, 0u);
  EXPECT_EQ(s.pending_prefill_tokens, 0u);
  EXPECT_EQ(s.active_kv_blocks, 0u);
  EXPECT_DOUBLE_EQ(*s.prefill_tokens_per_s, learned);
  EXPECT_EQ(router.tracker().inflight(), 0u);
}

}  // namespace
}  // namespace kvroute::simulate
