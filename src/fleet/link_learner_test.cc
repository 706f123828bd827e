// LinkLearner: per-lane KV-link bandwidth from observed pulls, seeded from the link spec.
#include "fleet/link_learner.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kvroute::fleet {
namespace {

TEST(LinkLearnerTest, WithoutSamplesItIsTheSeed) {
  LinkLearner l(49.5e9, 0.001);
  EXPECT_DOUBLE_EQ(*l.lane_bytes_per_s(), 49.5e9);
  EXPECT_DOUBLE_EQ(l.latency_s(), 0.001);
  EXPECT_FALSE(LinkLearner().lane_bytes_per_s().has_value());  // no link: no bandwidth
}

TEST(LinkLearnerTest, PullsAtTheSeedsSpeedKeepTheSeed) {
  LinkLearner l(10e9, 0.001);
  // 2 lanes × 10 GB/s: 1 GB in 0.05 s + the latency.
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(l.Observe(1e9, 2, 0.051));
  EXPECT_NEAR(*l.lane_bytes_per_s(), 10e9, 1e3);
  EXPECT_EQ(l.samples(), 50u);
}

TEST(LinkLearnerTest, SlowerPullsMoveTheEstimateTowardWhatWasObserved) {
  LinkLearner l(10e9, 0.0);
  // Observed 2.5 GB/s per lane (four pulls sharing the lanes): the prior (10 samples) fades.
  double last = *l.lane_bytes_per_s();
  for (int i = 0; i < 400; ++i) {
    l.Observe(1e9, 2, 0.2);
    const double now = *l.lane_bytes_per_s();
    EXPECT_LE(now, last);  // monotone toward the observations
    last = now;
  }
  EXPECT_NEAR(last, 2.5e9, 0.05 * 2.5e9);
  // One sample moves it by a bounded factor: the log mean over ~100 samples of memory.
  LinkLearner fresh(10e9, 0.0);
  fresh.Observe(1e9, 1, 1.0);  // 1 GB/s, 10x slower
  EXPECT_GT(*fresh.lane_bytes_per_s(), 7e9);
}

TEST(LinkLearnerTest, UnusableSamplesAreRejectedAndCounted) {
  LinkLearner l(10e9, 0.01);
  EXPECT_FALSE(l.Observe(1e9, 2, 0.005));  // shorter than the latency
  EXPECT_FALSE(l.Observe(1e9, 0, 0.5));
  EXPECT_FALSE(l.Observe(std::nan(""), 2, 0.5));
  EXPECT_FALSE(l.Observe(0, 2, 0.5));
  EXPECT_FALSE(l.Observe(1e9, 2, INFINITY));
  EXPECT_EQ(l.rejected(), 5u);
  EXPECT_EQ(l.samples(), 0u);
  EXPECT_DOUBLE_EQ(*l.lane_bytes_per_s(), 10e9);
  EXPECT_FALSE(LinkLearner().Observe(1e9, 2, 0.5));  // no seed: nothing to learn into
}

}  // namespace
}  // namespace kvroute::fleet
