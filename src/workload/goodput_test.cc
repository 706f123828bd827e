#include "workload/goodput.h"

#include <gtest/gtest.h>

namespace kvroute::workload {
namespace {

TEST(GoodputTest, TpotExcludesTheFirstToken) {
  RequestResult r{.ok = true, .ttft_s = 0.5, .e2e_s = 1.5, .output_tokens = 11};
  EXPECT_DOUBLE_EQ(Tpot(r), 0.1);  // (1.5 − 0.5) / 10
  r.output_tokens = 1;
  EXPECT_DOUBLE_EQ(Tpot(r), 0);
}

// Two GPUs. c=1: 10,000 tokens / 10 s / 2 = 500 tok/s/GPU, ITL 20 ms.
// c=4: 36,000 / 10 / 2 = 1,800, ITL 30 ms. c=8: 60,000 / 10 / 2 = 3,000, ITL 50 ms.
std::vector<ConcurrencyLevel> Sweep() {
  return {{8, 10, 60000, 0.050}, {1, 10, 10000, 0.020}, {4, 10, 36000, 0.030}};
}

TEST(GoodputTest, InferaTakesTheHighestConcurrencyMeetingTheTarget) {
  auto g30 = ComputeInferaGoodput(Sweep(), 30, 2);  // ITL ≤ 33.3 ms
  ASSERT_TRUE(g30.tokens_per_s_per_gpu.has_value());
  EXPECT_DOUBLE_EQ(*g30.tokens_per_s_per_gpu, 1800);
  EXPECT_EQ(*g30.at_concurrency, 4);
  ASSERT_EQ(g30.points.size(), 3u);
  EXPECT_EQ(g30.points[0].concurrency, 1);  // sorted
  EXPECT_FALSE(g30.points[2].meets_target);

  auto g50 = ComputeInferaGoodput(Sweep(), 50, 2);  // ITL ≤ 20 ms: only c=1
  EXPECT_DOUBLE_EQ(*g50.tokens_per_s_per_gpu, 500);
  EXPECT_EQ(*g50.at_concurrency, 1);

  auto g100 = ComputeInferaGoodput(Sweep(), 100, 2);  // ITL ≤ 10 ms: none
  EXPECT_FALSE(g100.tokens_per_s_per_gpu.has_value());
}

std::vector<RequestResult> Requests(int meeting, int missing) {
  std::vector<RequestResult> out;
  for (int i = 0; i < meeting; ++i) out.push_back({.ok = true, .ttft_s = 0.1, .e2e_s = 1.1, .output_tokens = 11});
  // TTFT fine, TPOT 0.2 s > 0.15 s target.
  for (int i = 0; i < missing; ++i) out.push_back({.ok = true, .ttft_s = 0.1, .e2e_s = 2.1, .output_tokens = 11});
  return out;
}

TEST(GoodputTest, DistServeTakesTheHighestRateWithNinetyPercentAttainment) {
  SloTargets slo{.ttft_s = 0.2, .tpot_s = 0.15};
  std::vector<RateLevel> levels = {{4, Requests(8, 2)}, {1, Requests(10, 0)}, {2, Requests(9, 1)}};
  auto g = ComputeDistServeGoodput(levels, slo, 2);
  ASSERT_TRUE(g.rate_per_s.has_value());
  EXPECT_DOUBLE_EQ(*g.rate_per_s, 2);
  EXPECT_DOUBLE_EQ(*g.rate_per_s_per_gpu, 1);
  ASSERT_EQ(g.points.size(), 3u);
  EXPECT_DOUBLE_EQ(g.points[2].attainment, 0.8);
}

TEST(GoodputTest, FailedRequestsDoNotAttain) {
  auto reqs = Requests(1, 0);
  reqs.push_back({.ok = false, .error_kind = "http_5xx"});
  EXPECT_DOUBLE_EQ(*SloAttainment(reqs, {.ttft_s = 1, .tpot_s = 1}), 0.5);
  EXPECT_FALSE(SloAttainment({}, {}).has_value());
}

TEST(GoodputTest, HitRateFromCounterDeltas) {
  EXPECT_DOUBLE_EQ(*HitRate(100, 1100, 50, 800), 0.75);  // 750 / 1000
  EXPECT_FALSE(HitRate(100, 100, 0, 0).has_value());      // no queries
  EXPECT_FALSE(HitRate(1000, 10, 500, 5).has_value());    // counters reset
}

}  // namespace
}  // namespace kvroute::workload
