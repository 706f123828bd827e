// TierLoadLearner: per-tier load bandwidth from samples, seeded and bounded; AttributeTierLoad:
// which first tokens become a tier sample, and what they say.
#include "fleet/tier_load_learner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace kvroute::fleet {
namespace {

constexpr double kHost = 25e9;
constexpr double kDisk = 6.5e9;
constexpr double kStore = 12.5e9;

TierLoadLearner::Bandwidths Seeds() {
  TierLoadLearner::Bandwidths b{};
  b[static_cast<int>(Tier::kCpu)] = kHost;
  b[static_cast<int>(Tier::kDisk)] = kDisk;
  b[static_cast<int>(Tier::kShared)] = kStore;
  return b;
}

// A deterministic stream of load sizes and noise, independent of the learner's arithmetic.
struct Lcg {
  std::uint64_t s = 12345;
  double Uniform() {  // [0, 1)
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(s >> 11) / 9007199254740992.0;
  }
};

// Loads of 16-1,300 blocks of 4.2 MB at `true_bw`, each time off by up to ±25 %.
void Feed(TierLoadLearner* l, Tier tier, double true_bw, int n, TierSampleSource src) {
  Lcg g;
  for (int i = 0; i < n; ++i) {
    const double bytes = (16 + 1284 * g.Uniform()) * 4.2e6;
    const double noise = 0.75 + 0.5 * g.Uniform();
    ASSERT_TRUE(l->Observe(tier, bytes, bytes / true_bw * noise, src));
  }
}

TEST(TierLoadLearnerTest, WithoutSamplesEveryTierIsItsSeed) {
  TierLoadLearner l(Seeds());
  EXPECT_DOUBLE_EQ(*l.bytes_per_s(Tier::kCpu), kHost);
  EXPECT_DOUBLE_EQ(*l.bytes_per_s(Tier::kDisk), kDisk);
  EXPECT_DOUBLE_EQ(*l.bytes_per_s(Tier::kShared), kStore);
  EXPECT_FALSE(l.bytes_per_s(Tier::kGpu).has_value());
  const auto all = l.bytes_per_s();
  EXPECT_FALSE(all[0].has_value());
  EXPECT_DOUBLE_EQ(*all[static_cast<int>(Tier::kDisk)], kDisk);
}

TEST(TierLoadLearnerTest, AMissingOrUnusableSeedLeavesTheTierWithoutBandwidth) {
  TierLoadLearner::Bandwidths b{};
  b[static_cast<int>(Tier::kCpu)] = 0.0;
  b[static_cast<int>(Tier::kDisk)] = std::numeric_limits<double>::infinity();
  TierLoadLearner l(b);
  for (Tier t : {Tier::kCpu, Tier::kDisk, Tier::kShared}) {
    EXPECT_FALSE(l.bytes_per_s(t).has_value());
    EXPECT_FALSE(l.Observe(t, 1e9, 0.1, TierSampleSource::kTtft));  // nothing to learn into
    EXPECT_EQ(l.rejected(t), 1u);
  }
  EXPECT_FALSE(TierLoadLearner().bytes_per_s(Tier::kCpu).has_value());
}

TEST(TierLoadLearnerTest, ConvergesToATrueBandwidthThreeTimesBelowTheSeed) {
  TierLoadLearner l(Seeds());
  const double truth = kDisk / 3;
  double last = *l.bytes_per_s(Tier::kDisk);
  Feed(&l, Tier::kDisk, truth, 300, TierSampleSource::kTtft);
  const double learned = *l.bytes_per_s(Tier::kDisk);
  EXPECT_LT(learned, last);
  EXPECT_NEAR(learned, truth, 0.08 * truth);
  // The other tiers heard nothing.
  EXPECT_DOUBLE_EQ(*l.bytes_per_s(Tier::kCpu), kHost);
  EXPECT_EQ(l.samples(Tier::kDisk), 300u);
}

TEST(TierLoadLearnerTest, ConvergesToATrueBandwidthThreeTimesAboveTheSeed) {
  TierLoadLearner l(Seeds());
  const double truth = kStore * 3;
  Feed(&l, Tier::kShared, truth, 300, TierSampleSource::kTransfer);
  EXPECT_NEAR(*l.bytes_per_s(Tier::kShared), truth, 0.08 * truth);
  EXPECT_EQ(l.transfer_samples(Tier::kShared), 300u);
}

TEST(TierLoadLearnerTest, OneSampleMovesTheEstimateOnlyPartWay) {
  TierLoadLearner l(Seeds());
  l.Observe(Tier::kCpu, 1e9, 1e9 / (kHost / 4), TierSampleSource::kTtft);  // 4x slower
  const double v = *l.bytes_per_s(Tier::kCpu);
  EXPECT_LT(v, kHost);
  EXPECT_GT(v, 0.8 * kHost);  // the seed is worth 10 samples
}

TEST(TierLoadLearnerTest, DegenerateSamplesAreRejectedAndLeaveTheSeed) {
  TierLoadLearner l(Seeds());
  const double nan = std::nan("");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(l.Observe(Tier::kDisk, 0, 0.1, TierSampleSource::kTtft));     // zero bytes
  EXPECT_FALSE(l.Observe(Tier::kDisk, -5e8, 0.1, TierSampleSource::kTtft));  // negative bytes
  EXPECT_FALSE(l.Observe(Tier::kDisk, 1e9, -0.2, TierSampleSource::kTtft));  // negative time
  EXPECT_FALSE(l.Observe(Tier::kDisk, 1e9, 0, TierSampleSource::kTtft));
  EXPECT_FALSE(l.Observe(Tier::kDisk, nan, 0.1, TierSampleSource::kTtft));
  EXPECT_FALSE(l.Observe(Tier::kDisk, 1e9, nan, TierSampleSource::kTtft));
  EXPECT_FALSE(l.Observe(Tier::kDisk, inf, 0.1, TierSampleSource::kTtft));
  EXPECT_FALSE(l.Observe(Tier::kDisk, 1e9, inf, TierSampleSource::kTtft));
  EXPECT_FALSE(l.Observe(Tier::kDisk, 1e300, 1e-300, TierSampleSource::kTtft));  // overflows
  EXPECT_FALSE(l.Observe(Tier::kGpu, 1e9, 0.1, TierSampleSource::kTtft));  // GPU loads nothing
  EXPECT_EQ(l.rejected(Tier::kDisk), 9u);
  EXPECT_EQ(l.samples(Tier::kDisk), 0u);
  EXPECT_DOUBLE_EQ(*l.bytes_per_s(Tier::kDisk), kDisk);
}

TEST(TierLoadLearnerTest, AdversarialSamplesStayWithinTheBound) {
  TierLoadLearner l(Seeds());
  // Absurdly fast loads: the estimate stops at 8x the seed, however many.
  for (int i = 0; i < 2000; ++i) l.Observe(Tier::kCpu, 1e12, 1e-9, TierSampleSource::kTtft);
  const double fast = *l.bytes_per_s(Tier::kCpu);
  EXPECT_TRUE(std::isfinite(fast));
  EXPECT_LE(fast, 8 * kHost * (1 + 1e-12));
  EXPECT_GT(fast, 7.5 * kHost);
  // Absurdly slow ones: it stops at 1/8.
  for (int i = 0; i < 2000; ++i) l.Observe(Tier::kCpu, 1, 1e6, TierSampleSource::kTtft);
  const double slow = *l.bytes_per_s(Tier::kCpu);
  EXPECT_GE(slow, kHost / 8 * (1 - 1e-12));
  EXPECT_LT(slow, kHost / 7.5);
  // Alternating extremes: positive, finite, inside the bound at every step.
  for (int i = 0; i < 1000; ++i) {
    l.Observe(Tier::kCpu, i % 2 ? 1e15 : 1, i % 2 ? 1e-12 : 1e9, TierSampleSource::kTtft);
    const double v = *l.bytes_per_s(Tier::kCpu);
    ASSERT_TRUE(std::isfinite(v) && v > 0);
    ASSERT_LE(v, 8 * kHost * (1 + 1e-12));
    ASSERT_GE(v, kHost / 8 * (1 - 1e-12));
  }
}

TEST(TierLoadLearnerTest, TheEnginesTransferCountersOutrankTtftResiduals) {
  TierLoadLearner l(Seeds());
  EXPECT_TRUE(l.Observe(Tier::kCpu, 1e9, 1e9 / 20e9, TierSampleSource::kTransfer));
  const double after_transfer = *l.bytes_per_s(Tier::kCpu);
  EXPECT_FALSE(l.Observe(Tier::kCpu, 1e9, 1.0, TierSampleSource::kTtft));  // ignored
  EXPECT_DOUBLE_EQ(*l.bytes_per_s(Tier::kCpu), after_transfer);
  EXPECT_EQ(l.rejected(Tier::kCpu), 1u);
  EXPECT_TRUE(l.Observe(Tier::kDisk, 1e9, 1.0, TierSampleSource::kTtft));  // other tiers still
}

// --- AttributeTierLoad.

// A first token on an idle worker whose prediction's non-load terms were exact: prefill
// 0.3 s, decode interference 0.02 s, `bytes` from `tier` at `true_bw` (the prediction used
// `believed_bw`).
TierLoadObservation Idle(Tier tier, double bytes, double true_bw, double believed_bw) {
  TierLoadObservation o;
  o.load_bytes[static_cast<int>(tier)] = bytes;
  o.predicted_wait_s = 0.02;
  o.predicted_load_s = bytes / believed_bw;
  o.predicted_ttft_s = 0.3 + o.predicted_wait_s + o.predicted_load_s;
  o.measured_ttft_s = 0.3 + 0.02 + bytes / true_bw;
  return o;
}

TEST(AttributeTierLoadTest, TheUnexplainedTtftIsTheDominantTiersLoad) {
  const double bytes = 800 * 4.2e6;
  auto s = AttributeTierLoad(Idle(Tier::kDisk, bytes, kDisk / 4, kDisk));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->tier, Tier::kDisk);
  EXPECT_DOUBLE_EQ(s->bytes, bytes);
  EXPECT_NEAR(s->bytes / s->seconds, kDisk / 4, 1e-6 * kDisk);
  // A minor second tier (10 % of the bytes) does not stop it.
  TierLoadObservation o = Idle(Tier::kShared, bytes, kStore * 2, kStore);
  o.load_bytes[static_cast<int>(Tier::kCpu)] = bytes / 9;
  s = AttributeTierLoad(o);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->tier, Tier::kShared);
}

TEST(AttributeTierLoadTest, SkipsWhatCannotBeAttributed) {
  const double bytes = 800 * 4.2e6;
  TierLoadObservation none = Idle(Tier::kDisk, bytes, kDisk, kDisk);
  none.load_bytes = {};
  EXPECT_FALSE(AttributeTierLoad(none));  // nothing loaded from a lower tier
  TierLoadObservation split = Idle(Tier::kDisk, bytes, kDisk, kDisk);
  split.load_bytes[static_cast<int>(Tier::kCpu)] = bytes * 0.5;  // disk has 67 % < 80 %
  EXPECT_FALSE(AttributeTierLoad(split));
  TierLoadObservation queued = Idle(Tier::kDisk, bytes, kDisk, kDisk);
  queued.queued_ahead_tokens = 4096;
  EXPECT_FALSE(AttributeTierLoad(queued));
  TierLoadObservation early = Idle(Tier::kDisk, bytes, kDisk, kDisk);
  early.measured_ttft_s = 0.2;  // sooner than prefill alone: a negative residual
  EXPECT_FALSE(AttributeTierLoad(early));
  TierLoadObservation waity = Idle(Tier::kDisk, bytes, kDisk, kDisk);
  waity.predicted_wait_s = 10;  // the wait is most of the prediction
  waity.predicted_ttft_s = 10 + 0.3 + waity.predicted_load_s;
  EXPECT_FALSE(AttributeTierLoad(waity));
  TierLoadObservation nan = Idle(Tier::kDisk, bytes, kDisk, kDisk);
  nan.predicted_ttft_s = std::nan("");
  EXPECT_FALSE(AttributeTierLoad(nan));
  TierLoadObservation clamped = Idle(Tier::kDisk, bytes, kDisk, kDisk);
  clamped.predicted_ttft_s = clamped.predicted_load_s / 2;  // not the sum of its terms
  EXPECT_FALSE(AttributeTierLoad(clamped));
  TierLoadObservation bad_bytes = Idle(Tier::kDisk, bytes, kDisk, kDisk);
  bad_bytes.load_bytes[static_cast<int>(Tier::kCpu)] = std::nan("");
  EXPECT_FALSE(AttributeTierLoad(bad_bytes));
}

// The closed loop: each request's prediction uses what the learner says now, the engine
// loads at the true bandwidth, and the residual teaches the learner.
double ClosedLoop(double seed, double truth, int n) {
  TierLoadLearner::Bandwidths b{};
  b[static_cast<int>(Tier::kDisk)] = seed;
  TierLoadLearner l(b);
  Lcg g;
  for (int i = 0; i < n; ++i) {
    const double bytes = (50 + 1000 * g.Uniform()) * 4.2e6;
    TierLoadObservation o = Idle(Tier::kDisk, bytes, truth, *l.bytes_per_s(Tier::kDisk));
    o.measured_ttft_s += 0.05 * (g.Uniform() - 0.5);  // ±25 ms of prefill noise
    if (auto s = AttributeTierLoad(o)) l.Observe(s->tier, s->bytes, s->seconds, TierSampleSource::kTtft);
  }
  return *l.bytes_per_s(Tier::kDisk);
}

TEST(AttributeTierLoadTest, ResidualsLeadTheLearnerToTheTrueBandwidthFromEitherSide) {
  const double truth = kDisk;
  EXPECT_NEAR(ClosedLoop(4 * truth, truth, 400), truth, 0.1 * truth);  // seeded 4x too fast
  EXPECT_NEAR(ClosedLoop(truth / 4, truth, 400), truth, 0.1 * truth);  // seeded 4x too slow
}

}  // namespace
}  // namespace kvroute::fleet
