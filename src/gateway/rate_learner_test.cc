#include "gateway/rate_learner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "engine/step_time.h"

namespace kvroute::gateway {
namespace {

constexpr WorkerId kW = 3;

RateSeed TestSeed() {
  RateSeed s;
  s.prefill_overhead_s = 0.01;
  s.prefill_s_per_token = 1.0 / 20000;  // 20k tokens/s
  s.decode = {.base_s = 0.02, .per_sequence_s = 1e-4, .per_kv_token_s = 5e-8};
  return s;
}

Nanos Secs(double s) { return FromSeconds(s); }

TEST(RateLearnerTest, UnseededWorkerHasNoEstimateAndIgnoresSamples) {
  RateLearner learner;
  learner.ObservePrefill(kW, 1000, Secs(0.1));
  EXPECT_FALSE(learner.Estimate(kW).has_value());
}

TEST(RateLearnerTest, StaysAtTheSeedWithNoSamples) {
  RateLearner learner;
  learner.Seed(kW, TestSeed());
  auto e = learner.Estimate(kW);
  ASSERT_TRUE(e.has_value());
  EXPECT_NEAR(e->prefill_tokens_per_s, 20000, 1e-6);
  EXPECT_NEAR(e->prefill_overhead_s, 0.01, 1e-12);
  EXPECT_NEAR(e->decode.base_s, 0.02, 1e-12);
  EXPECT_NEAR(e->decode.per_sequence_s, 1e-4, 1e-15);
  EXPECT_NEAR(e->decode.per_kv_token_s, 5e-8, 1e-18);
  EXPECT_EQ(e->prefill_samples, 0u);
  EXPECT_EQ(e->decode_samples, 0u);
}

TEST(RateLearnerTest, PrefillConvergesToTheModelThatGeneratedTheSamples) {
  RateLearner learner;
  learner.Seed(kW, TestSeed());
  const double true_overhead = 0.05, true_rate = 8000;
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> tokens(100, 16000);
  for (int i = 0; i < 3000; ++i) {
    double t = tokens(rng);
    learner.ObservePrefill(kW, t, Secs(true_overhead + t / true_rate));
  }
  auto e = learner.Estimate(kW);
  ASSERT_TRUE(e.has_value());
  EXPECT_NEAR(e->prefill_tokens_per_s, true_rate, true_rate * 0.02);
  EXPECT_NEAR(e->prefill_overhead_s, true_overhead, true_overhead * 0.1);
  EXPECT_EQ(e->prefill_samples, 3000u);
}

TEST(RateLearnerTest, DecodeConvergesToTheModelThatGeneratedTheSamples) {
  RateLearner learner;
  learner.Seed(kW, TestSeed());
  const sched::StepTimeModel truth{.base_s = 0.012, .per_sequence_s = 2e-4, .per_kv_token_s = 2e-8};
  std::mt19937 rng(2);
  std::uniform_int_distribution<int> batch(1, 128);
  std::uniform_real_distribution<double> ctx(256, 8192);
  for (int i = 0; i < 5000; ++i) {
    double b = batch(rng);
    double kv = b * ctx(rng);
    learner.ObserveDecode(kW, b, kv, Secs(truth.Seconds(b, kv)));
  }
  auto e = learner.Estimate(kW);
  ASSERT_TRUE(e.has_value());
  EXPECT_NEAR(e->decode.base_s, truth.base_s, truth.base_s * 0.03);
  EXPECT_NEAR(e->decode.per_sequence_s, truth.per_sequence_s, truth.per_sequence_s * 0.03);
  EXPECT_NEAR(e->decode.per_kv_token_s, truth.per_kv_token_s, truth.per_kv_token_s * 0.03);
}

TEST(RateLearnerTest, ConvergesUnderNoise) {
  RateLearner learner;
  learner.Seed(kW, TestSeed());
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> tokens(500, 8000);
  std::normal_distribution<double> noise(1.0, 0.1);
  for (int i = 0; i < 5000; ++i) {
    double t = tokens(rng);
    learner.ObservePrefill(kW, t, Secs((0.02 + t / 10000) * std::max(0.5, noise(rng))));
  }
  EXPECT_NEAR(learner.Estimate(kW)->prefill_tokens_per_s, 10000, 1000);
}

TEST(RateLearnerTest, IgnoresGarbageSamples) {
  RateLearner learner;
  learner.Seed(kW, TestSeed());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  learner.ObservePrefill(kW, 1000, Secs(-0.5));
  learner.ObservePrefill(kW, 1000, Nanos(0));
  learner.ObservePrefill(kW, 1000, Secs(1e7));  // > max_sample_s
  learner.ObservePrefill(kW, nan, Secs(0.1));
  learner.ObservePrefill(kW, inf, Secs(0.1));
  learner.ObservePrefill(kW, -5, Secs(0.1));
  learner.ObserveDecode(kW, nan, 1000, Secs(0.02));
  learner.ObserveDecode(kW, 4, -1, Secs(0.02));
  learner.ObserveDecode(kW, 0, 1000, Secs(0.02));
  learner.ObserveDecode(kW, 4, 1000, Secs(-1));
  auto e = learner.Estimate(kW);
  EXPECT_EQ(e->rejected_samples, 10u);
  EXPECT_EQ(e->prefill_samples, 0u);
  EXPECT_EQ(e->decode_samples, 0u);
  EXPECT_NEAR(e->prefill_tokens_per_s, 20000, 1e-6);
  EXPECT_NEAR(e->decode.base_s, 0.02, 1e-12);
}

TEST(RateLearnerTest, OneHugeOutlierMovesAConvergedEstimateOnlySlightly) {
  RateLearner learner;
  learner.Seed(kW, TestSeed());
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> tokens(100, 16000);
  for (int i = 0; i < 2000; ++i) {
    double t = tokens(rng);
    learner.ObservePrefill(kW, t, Secs(0.01 + t / 20000));
  }
  double before = learner.Estimate(kW)->prefill_tokens_per_s;
  learner.ObservePrefill(kW, 4000, Secs(500));  // 2000x the prediction
  double after = learner.Estimate(kW)->prefill_tokens_per_s;
  // Unclipped, this sample would pull the fit by orders of magnitude; clipped, by a few %.
  EXPECT_NEAR(after, before, before * 0.05);
}

TEST(RateLearnerTest, ReseedingDropsWhatWasLearned) {
  RateLearner learner;
  learner.Seed(kW, TestSeed());
  for (int i = 0; i < 100; ++i) learner.ObservePrefill(kW, 1000 + i * 10, Secs(1.0));
  learner.Seed(kW, TestSeed());
  EXPECT_EQ(learner.Estimate(kW)->prefill_samples, 0u);
  EXPECT_NEAR(learner.Estimate(kW)->prefill_tokens_per_s, 20000, 1e-6);
  learner.Remove(kW);
  EXPECT_FALSE(learner.Estimate(kW).has_value());
}

TEST(RateLearnerTest, SeedFromProfileFollowsTheRooflineModel) {
  auto profile = engine::LoadProfile(engine::kDefaultProfileName);
  ASSERT_TRUE(profile.has_value()) << profile.error();
  auto seed = SeedFromProfile(*profile);
  ASSERT_TRUE(seed.has_value()) << seed.error();
  engine::StepTimeModel model(*profile);
  double predicted = seed->prefill_overhead_s + 4096 * seed->prefill_s_per_token;
  double roofline = ToSeconds(model.PrefillTime(4096, 0));
  EXPECT_NEAR(predicted, roofline, roofline * 0.2);
  double step = seed->decode.Seconds(32, 32.0 * 2048);
  double roof_step = ToSeconds(model.DecodeStepTime(32, 32 * 2048));
  EXPECT_NEAR(step, roof_step, roof_step * 0.2);
  EXPECT_GE(seed->decode.base_s, 0);
  EXPECT_GE(seed->decode.per_sequence_s, 0);
  EXPECT_GE(seed->decode.per_kv_token_s, 0);
}

}  // namespace
}  // namespace kvroute::gateway
