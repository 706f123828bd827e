#include "fleet/load_tracker.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "fleet/rate_learner.h"

namespace kvroute::fleet {
namespace {

constexpr WorkerId kA = 1;
constexpr WorkerId kB = 2;

Nanos Ms(double ms) { return FromSeconds(ms / 1000); }

RoutedRequest Req(WorkerId w, std::uint64_t prompt, std::uint64_t uncached, std::uint64_t blocks) {
  return {.worker = w, .prompt_tokens = prompt, .uncached_tokens = uncached, .kv_blocks = blocks};
}

TEST(LoadTrackerTest, RouteCountsInflightPendingPrefillAndBlocks) {
  LoadTracker t;
  ASSERT_TRUE(t.OnRouted(10, Req(kA, 1000, 600, 63), Ms(0)));
  ASSERT_TRUE(t.OnRouted(11, Req(kA, 200, 200, 13), Ms(1)));
  WorkerLoad l = t.Load(kA);
  EXPECT_EQ(l.inflight_requests, 2u);
  EXPECT_EQ(l.pending_prefill_tokens, 800u);
  EXPECT_EQ(l.active_kv_blocks, 76u);
  EXPECT_EQ(t.Load(kB), WorkerLoad{});
}

TEST(LoadTrackerTest, FirstTokenDropsPendingPrefillButKeepsBlocks) {
  LoadTracker t;
  t.OnRouted(10, Req(kA, 1000, 600, 63), Ms(0));
  t.OnFirstToken(10, Ms(50));
  WorkerLoad l = t.Load(kA);
  EXPECT_EQ(l.inflight_requests, 1u);
  EXPECT_EQ(l.pending_prefill_tokens, 0u);
  EXPECT_EQ(l.active_kv_blocks, 63u);
  EXPECT_EQ(l.decoding_requests, 1u);
  EXPECT_EQ(l.active_kv_tokens, 1001u);
}

TEST(LoadTrackerTest, CompletionFreesEverything) {
  LoadTracker t;
  t.OnRouted(10, Req(kA, 1000, 600, 63), Ms(0));
  t.OnFirstToken(10, Ms(50));
  t.OnToken(10, Ms(70), 3);
  t.OnDone(10, Ms(90), true);
  EXPECT_EQ(t.Load(kA), WorkerLoad{});
  EXPECT_EQ(t.inflight(), 0u);
}

TEST(LoadTrackerTest, FailureBeforeFirstTokenReleasesPendingPrefill) {
  LoadTracker t;
  t.OnRouted(10, Req(kA, 1000, 600, 63), Ms(0));
  t.OnRouted(11, Req(kA, 100, 100, 7), Ms(0));
  t.OnDone(10, Ms(5), false);
  WorkerLoad l = t.Load(kA);
  EXPECT_EQ(l.inflight_requests, 1u);
  EXPECT_EQ(l.pending_prefill_tokens, 100u);
  EXPECT_EQ(l.active_kv_blocks, 7u);
}

TEST(LoadTrackerTest, LowerTierBytesArePendingUntilTheFirstTokenOrAFailure) {
  constexpr int kDisk = static_cast<int>(Tier::kDisk);
  constexpr int kShared = static_cast<int>(Tier::kShared);
  LoadTracker t;
  RoutedRequest a = Req(kA, 1000, 100, 63);
  a.tier_load_bytes[kDisk] = 3e6;
  a.tier_load_bytes[kShared] = 1e6;
  RoutedRequest b = Req(kA, 1000, 100, 63);
  b.tier_load_bytes[kShared] = 2e6;
  b.tier_load_bytes[kDisk] = std::numeric_limits<double>::quiet_NaN();  // counts as none
  t.OnRouted(10, a, Ms(0));
  t.OnRouted(11, b, Ms(0));
  EXPECT_EQ(t.Load(kA).pending_tier_load_bytes[kDisk], 3000000u);
  EXPECT_EQ(t.Load(kA).pending_tier_load_bytes[kShared], 3000000u);
  t.OnFirstToken(10, Ms(50));
  EXPECT_EQ(t.Load(kA).pending_tier_load_bytes[kDisk], 0u);
  EXPECT_EQ(t.Load(kA).pending_tier_load_bytes[kShared], 2000000u);
  t.OnDone(11, Ms(60), false);
  EXPECT_EQ(t.Load(kA).pending_tier_load_bytes[kShared], 0u);
}

TEST(LoadTrackerTest, UnknownIdsAndDoubleCompletionAreIgnoredAndCounted) {
  LoadTracker t;
  t.OnRouted(10, Req(kA, 100, 100, 7), Ms(0));
  t.OnFirstToken(99, Ms(1));
  t.OnToken(99, Ms(2));
  t.OnDone(99, Ms(3), true);
  t.OnDone(10, Ms(4), true);
  t.OnDone(10, Ms(5), true);
  t.OnFirstToken(10, Ms(6));
  EXPECT_EQ(t.stale_calls(), 5u);
  EXPECT_EQ(t.Load(kA), WorkerLoad{});
}

TEST(LoadTrackerTest, RoutingAnIdTwiceIsRejected) {
  LoadTracker t;
  EXPECT_TRUE(t.OnRouted(10, Req(kA, 100, 100, 7), Ms(0)));
  EXPECT_FALSE(t.OnRouted(10, Req(kB, 100, 100, 7), Ms(0)));
  EXPECT_EQ(t.Load(kA).inflight_requests, 1u);
  EXPECT_EQ(t.Load(kB).inflight_requests, 0u);
}

TEST(LoadTrackerTest, UncachedTokensAreClampedToThePrompt) {
  LoadTracker t;
  t.OnRouted(10, Req(kA, 100, 500, 7), Ms(0));
  EXPECT_EQ(t.Load(kA).pending_prefill_tokens, 100u);
}

TEST(LoadTrackerTest, ForgetWorkerDropsItsRequests) {
  LoadTracker t;
  t.OnRouted(10, Req(kA, 100, 100, 7), Ms(0));
  t.OnRouted(11, Req(kB, 100, 100, 7), Ms(0));
  t.ForgetWorker(kA);
  EXPECT_EQ(t.Load(kA), WorkerLoad{});
  EXPECT_EQ(t.inflight(), 1u);
  t.OnDone(10, Ms(1), true);  // ignored
  EXPECT_EQ(t.stale_calls(), 1u);
  EXPECT_EQ(t.Load(kB).inflight_requests, 1u);
}

class LoadTrackerLearningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RateSeed seed;
    seed.prefill_overhead_s = 0.001;
    seed.prefill_s_per_token = 1.0 / 50000;
    seed.decode = {.base_s = 0.01, .per_sequence_s = 1e-4, .per_kv_token_s = 1e-8};
    learner_.Seed(kA, seed);
  }
  RateLearner learner_;
  LoadTracker tracker_{&learner_};
};

TEST_F(LoadTrackerLearningTest, PendingPrefillDrainsAtTheLearnedRate) {
  // 30k + 20k uncached tokens booked at t = 0 on a worker learned at ~50k tokens/s: the
  // work still ahead shrinks with time, restarts from the remaining requests at each first
  // token, and never goes below zero; the booking itself (Load) is untouched.
  const double rate = learner_.Estimate(kA)->prefill_tokens_per_s;
  tracker_.OnRouted(1, Req(kA, 30000, 30000, 1), Ms(0));
  tracker_.OnRouted(2, Req(kA, 20000, 20000, 1), Ms(0));
  EXPECT_EQ(tracker_.PendingPrefillTokens(kA, Ms(0)), 50000u);
  EXPECT_NEAR(static_cast<double>(tracker_.PendingPrefillTokens(kA, Ms(200))), 50000 - 0.2 * rate, 2);
  EXPECT_EQ(tracker_.ViewOf(kA, Ms(200)).pending_prefill_tokens, tracker_.PendingPrefillTokens(kA, Ms(200)));
  EXPECT_EQ(tracker_.Load(kA).pending_prefill_tokens, 50000u);
  tracker_.OnFirstToken(1, Ms(700));
  const double learned = learner_.Estimate(kA)->prefill_tokens_per_s;  // request 1 taught it
  EXPECT_EQ(tracker_.PendingPrefillTokens(kA, Ms(700)), 20000u);
  EXPECT_NEAR(static_cast<double>(tracker_.PendingPrefillTokens(kA, Ms(800))), 20000 - 0.1 * learned, 2);
  EXPECT_EQ(tracker_.PendingPrefillTokens(kA, Ms(5000)), 0u);  // overdue: nothing left ahead
  // A request routed behind a drained queue sees what is left, not the whole booking.
  tracker_.OnRouted(3, Req(kA, 1000, 1000, 1), Ms(800));
  EXPECT_NEAR(static_cast<double>(tracker_.PendingPrefillTokens(kA, Ms(800))), 21000 - 0.1 * learned, 2);
  // Without a learner nothing drains.
  LoadTracker plain;
  plain.OnRouted(1, Req(kA, 30000, 30000, 1), Ms(0));
  EXPECT_EQ(plain.PendingPrefillTokens(kA, Ms(5000)), 30000u);
}

TEST_F(LoadTrackerLearningTest, TtftIsFittedAgainstOwnPlusQueuedAheadTokens) {
  // A worker that prefills 10k tokens/s, FIFO: request 2's TTFT includes request 1's work.
  const double rate = 10000;
  RequestId id = 0;
  Nanos now{0};
  for (int round = 0; round < 400; ++round) {
    std::uint64_t a = 500 + (round * 37) % 3000, b = 300 + (round * 91) % 2000;
    tracker_.OnRouted(++id, Req(kA, a, a, 1), now);
    tracker_.OnRouted(++id, Req(kA, b, b, 1), now);
    tracker_.OnFirstToken(id - 1, now + FromSeconds(a / rate));
    tracker_.OnFirstToken(id, now + FromSeconds((a + b) / rate));
    tracker_.OnDone(id - 1, now + FromSeconds(1), true);
    tracker_.OnDone(id, now + FromSeconds(1), true);
    now += FromSeconds(2);
  }
  auto e = learner_.Estimate(kA);
  EXPECT_EQ(e->prefill_samples, 800u);
  EXPECT_NEAR(e->prefill_tokens_per_s, rate, rate * 0.05);
}

// A worker whose prefill time has an attention share (q > 0), prefilling exactly at its
// seed: c0 + c1 · (u + q·u² + 2q·u·c) per request, FIFO.
class LoadTrackerCurveTest : public ::testing::Test {
 protected:
  static constexpr double kQ = 1.0 / 131072;
  void SetUp() override {
    seed_.prefill_overhead_s = 0.02;
    seed_.prefill_s_per_token = 1e-5;
    seed_.prefill_s_per_token_sq = kQ * seed_.prefill_s_per_token;
    seed_.decode = {.base_s = 0.01, .per_sequence_s = 1e-4, .per_kv_token_s = 1e-8};
    learner_.Seed(kA, seed_);
  }
  double OwnSeconds(double u, double c) const {
    return seed_.prefill_s_per_token * (u + kQ * (u * u + 2 * u * c));
  }
  RateSeed seed_;
  RateLearner learner_;
  LoadTracker tracker_{&learner_};
};

TEST_F(LoadTrackerCurveTest, AQueueOfLegsDoesNotSpeedUpTheLearnedRate) {
  // Infera's first turns on its one prefill engine: a 32k cold prompt, then fifteen legs of
  // 12k new tokens behind the 20k prefix the first one cached, routed together. Each first
  // token comes after the legs ahead of it. The queue ahead is fifteen prompts, not one
  // 200k-token prompt: put through the curve as one, its attention share made the learned
  // rate 2.0x the true one here (97k -> 236k tokens/s in `kvroute simulate`).
  const double seed_rate = learner_.Estimate(kA)->prefill_tokens_per_s;
  RequestId id = 0;
  Nanos now{0};
  for (int burst = 0; burst < 10; ++burst) {
    double done = seed_.prefill_overhead_s;
    for (int k = 0; k < 16; ++k) {
      const std::uint64_t uncached = k == 0 ? 32000 : 12000;
      ASSERT_TRUE(tracker_.OnRouted(++id, Req(kA, 32000, uncached, 1), now));
    }
    for (int k = 0; k < 16; ++k) {
      const RequestId r = id - 15 + k;
      done += k == 0 ? OwnSeconds(32000, 0) : OwnSeconds(12000, 20000);
      tracker_.OnFirstToken(r, now + FromSeconds(done));
      tracker_.OnDone(r, now + FromSeconds(done), true);
    }
    now += FromSeconds(60);
  }
  const RateEstimate e = *learner_.Estimate(kA);
  EXPECT_EQ(e.prefill_samples, 160u);
  EXPECT_NEAR(e.prefill_tokens_per_s / seed_rate, 1.0, 0.05) << e.prefill_tokens_per_s;
}

TEST_F(LoadTrackerCurveTest, PendingPrefillDrainsOnThePrefillCurve) {
  // A follow-up turn: 3,000 new tokens behind a 32,000-token cached history take
  // c1 · (u + q·(u² + 2·u·c)), 1.4x what its tokens take at the reference rate. Drained at
  // the reference rate the queue read empty at 70 % of the leg's time.
  const double seconds = OwnSeconds(3000, 32000);
  ASSERT_TRUE(tracker_.OnRouted(1, Req(kA, 35000, 3000, 1), Ms(0)));
  EXPECT_EQ(tracker_.PendingPrefillTokens(kA, Ms(0)), 3000u);
  EXPECT_NEAR(static_cast<double>(tracker_.PendingPrefillTokens(kA, FromSeconds(seconds / 2))),
              1500, 2);
  EXPECT_GT(tracker_.PendingPrefillTokens(kA, FromSeconds(seconds * 0.9)), 250u);
  EXPECT_EQ(tracker_.PendingPrefillTokens(kA, FromSeconds(seconds * 1.01)), 0u);
  // A second request booked behind it sees the first's work left plus its own tokens.
  ASSERT_TRUE(tracker_.OnRouted(2, Req(kA, 1000, 1000, 1), FromSeconds(seconds / 2)));
  const std::uint64_t both = tracker_.PendingPrefillTokens(kA, FromSeconds(seconds / 2));
  EXPECT_NEAR(static_cast<double>(both), 4000 * (1 - (seconds / 2) / (seconds + OwnSeconds(1000, 0))), 3);
  // The first token at the seed's prediction (overhead included) teaches nothing new; what
  // is left drains from there.
  const double first = seed_.prefill_overhead_s + seconds;
  tracker_.OnFirstToken(1, FromSeconds(first));
  EXPECT_EQ(tracker_.PendingPrefillTokens(kA, FromSeconds(first)), 1000u);
  EXPECT_NEAR(static_cast<double>(tracker_.PendingPrefillTokens(
                  kA, FromSeconds(first + OwnSeconds(1000, 0) / 2))),
              500, 2);
  tracker_.OnDone(1, FromSeconds(first), true);
  tracker_.OnDone(2, FromSeconds(first), false);
  EXPECT_EQ(tracker_.PendingPrefillTokens(kA, FromSeconds(first)), 0u);
}

TEST_F(LoadTrackerLearningTest, InterTokenGapsFitTheDecodeModelWithTheLiveBatch) {
  const sched::StepTimeModel truth{.base_s = 0.02, .per_sequence_s = 5e-4, .per_kv_token_s = 0};
  RequestId id = 0;
  Nanos now{0};
  for (int round = 0; round < 300; ++round) {
    int batch = 1 + round % 16;
    for (int i = 0; i < batch; ++i) tracker_.OnRouted(id + i + 1, Req(kA, 100, 100, 7), now);
    for (int i = 0; i < batch; ++i) tracker_.OnFirstToken(id + i + 1, now);
    double itl = truth.Seconds(batch, 0);
    for (int step = 1; step <= 4; ++step) {
      for (int i = 0; i < batch; ++i) tracker_.OnToken(id + i + 1, now + FromSeconds(itl * step));
    }
    for (int i = 0; i < batch; ++i) tracker_.OnDone(id + i + 1, now + FromSeconds(1), true);
    id += batch;
    now += FromSeconds(2);
  }
  auto e = learner_.Estimate(kA);
  EXPECT_GT(e->decode_samples, 1000u);
  EXPECT_NEAR(e->decode.Seconds(8, 8 * 110), truth.Seconds(8, 0), truth.Seconds(8, 0) * 0.05);
  EXPECT_NEAR(e->decode.per_sequence_s, truth.per_sequence_s, truth.per_sequence_s * 0.15);
}

TEST_F(LoadTrackerLearningTest, NoDecodeSampleWhilePrefillIsPendingOnTheWorker) {
  tracker_.OnRouted(1, Req(kA, 100, 100, 7), Ms(0));
  tracker_.OnFirstToken(1, Ms(10));
  tracker_.OnRouted(2, Req(kA, 5000, 5000, 300), Ms(11));  // its prefill mixes into steps
  tracker_.OnToken(1, Ms(40));
  EXPECT_EQ(learner_.Estimate(kA)->decode_samples, 0u);
  tracker_.OnFirstToken(2, Ms(60));
  tracker_.OnToken(1, Ms(80));
  EXPECT_EQ(learner_.Estimate(kA)->decode_samples, 1u);
}

// The relay reports decode tokens in windows of four (TokenBatcher) instead of per piece.
// On the same noise-free token sequence (batches 1..16, 16 tokens per request, one token per
// piece), both fit the true step model; they differ only in how much data each sample
// carries (1/4 as many samples, each a mean of four gaps).
TEST(TokenBatcherTest, ReportingInWindowsOfFourLearnsTheSameDecodeModelAsPerPiece) {
  const sched::StepTimeModel truth{.base_s = 0.02, .per_sequence_s = 5e-4, .per_kv_token_s = 0};
  RateSeed seed;
  seed.prefill_overhead_s = 0.001;
  seed.prefill_s_per_token = 1.0 / 50000;
  seed.decode = {.base_s = 0.01, .per_sequence_s = 1e-4, .per_kv_token_s = 1e-8};
  auto learn = [&](std::uint32_t window) {
    RateLearner learner;
    learner.Seed(kA, seed);
    LoadTracker tracker(&learner);
    RequestId id = 0;
    Nanos now{0};
    for (int round = 0; round < 300; ++round) {
      const int batch = 1 + round % 16;
      std::vector<TokenBatcher> batchers(batch, TokenBatcher(window));
      for (int i = 0; i < batch; ++i) tracker.OnRouted(id + i + 1, Req(kA, 100, 100, 7), now);
      for (int i = 0; i < batch; ++i) tracker.OnFirstToken(id + i + 1, now);
      const double itl = truth.Seconds(batch, 0);
      for (int step = 1; step <= 16; ++step) {
        for (int i = 0; i < batch; ++i) {
          batchers[i].Add(tracker, id + i + 1, now + FromSeconds(itl * step), 1);
        }
      }
      for (int i = 0; i < batch; ++i) batchers[i].Flush(tracker, id + i + 1);
      for (int i = 0; i < batch; ++i) tracker.OnDone(id + i + 1, now + FromSeconds(1), true);
      id += batch;
      now += FromSeconds(2);
    }
    return *learner.Estimate(kA);
  };
  const RateEstimate per_piece = learn(1);
  const RateEstimate windowed = learn(4);
  EXPECT_EQ(windowed.decode_samples * 4, per_piece.decode_samples);
  for (int batch : {1, 8, 16}) {
    const double want = truth.Seconds(batch, 0);
    const double a = per_piece.decode.Seconds(batch, batch * 110);
    const double b = windowed.decode.Seconds(batch, batch * 110);
    EXPECT_NEAR(a, want, want * 0.05) << "per piece, batch " << batch;
    EXPECT_NEAR(b, want, want * 0.05) << "windows of four, batch " << batch;
    // Measured: +0.25 % (batch 1), +0.05 % (8), -0.11 % (16) from the per-piece fit.
    EXPECT_NEAR(b, a, a * 0.005) << "batch " << batch;
  }
}

TEST(TokenBatcherTest, ReportsOncePerWindowAndTheRestAtFlush) {
  LoadTracker tracker;
  tracker.OnRouted(1, Req(kA, 100, 100, 7), Ms(0));
  tracker.OnFirstToken(1, Ms(10));  // 101 KV tokens
  TokenBatcher batcher(4);
  batcher.Add(tracker, 1, Ms(20), 1);
  batcher.Add(tracker, 1, Ms(30), 2);
  EXPECT_EQ(tracker.Load(kA).active_kv_tokens, 101u);  // 3 pending, not reported
  batcher.Add(tracker, 1, Ms(40), 1);
  EXPECT_EQ(tracker.Load(kA).active_kv_tokens, 105u);  // window of 4 reported
  batcher.Add(tracker, 1, Ms(50), 2);
  batcher.Flush(tracker, 1);
  EXPECT_EQ(tracker.Load(kA).active_kv_tokens, 107u);
  batcher.Flush(tracker, 1);  // nothing pending: no call
  EXPECT_EQ(tracker.stale_calls(), 0u);
}

// Calibration (issue 15): the queue-dependent part of predicted TTFT is corrected online.
RoutedRequest Predicted(WorkerId w, double ttft_s, double wait_s, double correction = 1) {
  RoutedRequest r = Req(w, 4000, 4000, 250);
  r.predicted_ttft_s = ttft_s;
  r.predicted_wait_s = wait_s;
  r.wait_correction = correction;
  return r;
}

// `n` requests on kA, one at a time, each predicted (with the correction the previous ones
// taught, as the policy's predictions carry it) to take `own` s of its own work plus a wait of
// `model_wait` s x the correction, and measured at `own` + `measured_wait` s.
void CalibrateOnSteadyWaits(LoadTracker& t, int n, double own, double model_wait,
                            double measured_wait) {
  for (RequestId id = 1; id <= static_cast<RequestId>(n); ++id) {
    const double c = t.WaitCorrection(kA, Ms(0));
    const Nanos at = Ms(100000.0 * static_cast<double>(id));
    t.OnRouted(id, Predicted(kA, own + model_wait * c, model_wait * c, c), at);
    t.OnFirstToken(id, at + FromSeconds(own + measured_wait));
    t.OnDone(id, at + FromSeconds(own + measured_wait + 0.5), true);
  }
}

TEST(LoadTrackerCalibrationTest, LearnsTheFactorByWhichWaitsAreUnderPredicted) {
  // Predicted: own 0.5 s + wait 2 s; measured: 0.5 s + 10 s (5x the wait).
  LoadTracker t;
  CalibrateOnSteadyWaits(t, 120, 0.5, 2, 10);
  EXPECT_NEAR(t.WaitCorrection(kA, Ms(0)), 5.0, 0.05);
  const TtftCalibration cal = t.Calibration(kA);
  EXPECT_EQ(cal.samples, 120u);
  EXPECT_NEAR(cal.drift, 1.0, 0.05);  // calibrated now: measured / predicted ~ 1
  EXPECT_EQ(t.WaitCorrection(kB, Ms(0)), 1.0);  // another worker is untouched
}

TEST(LoadTrackerCalibrationTest, OverPredictedWaitsLowerTheFactor) {
  LoadTracker t;
  CalibrateOnSteadyWaits(t, 60, 0.5, 8, 2);  // waited 2 s of a predicted 8
  EXPECT_NEAR(t.WaitCorrection(kA, Ms(0)), 0.25, 0.01);
}

TEST(LoadTrackerCalibrationTest, NoQueueEitherWayTeachesNothing) {
  LoadTracker t;
  for (RequestId id = 1; id <= 20; ++id) {
    const Nanos at = Ms(1000.0 * static_cast<double>(id));
    t.OnRouted(id, Predicted(kA, 0.4, 0.0), at);
    t.OnFirstToken(id, at + Ms(410));
    t.OnDone(id, at + Ms(500), true);
  }
  EXPECT_EQ(t.WaitCorrection(kA, Ms(0)), 1.0);
  EXPECT_EQ(t.Calibration(kA).samples, 20u);
}

TEST(LoadTrackerCalibrationTest, AWaitPredictedAtZeroTeachesNothing) {
  // Own prefill predicted 2 s, no wait; measured 2.5 s. The factor scales the predicted wait,
  // which is zero here: raising it would fix nothing for these requests and inflate every
  // queued prediction (it wound up to ~4x on the conversation traces, issue 15).
  LoadTracker t;
  for (RequestId id = 1; id <= 50; ++id) {
    const Nanos at = Ms(10000.0 * static_cast<double>(id));
    t.OnRouted(id, Predicted(kA, 2.0, 0.0), at);
    t.OnFirstToken(id, at + Ms(2500));
    t.OnDone(id, at + Ms(3000), true);
  }
  EXPECT_EQ(t.Calibration(kA).wait_correction, 1.0);
  EXPECT_EQ(t.Calibration(kA).samples, 50u);
}

TEST(LoadTrackerCalibrationTest, AnOverdueRequestRaisesTheFactorBeforeItsFirstToken) {
  // Predicted own 1 s + wait 4 s; 45 s later it still waits: >= (44 + 0.1) / (4 + 0.1) ~ 10.8x.
  LoadTracker t;
  t.OnRouted(1, Predicted(kA, 5, 4), Ms(0));
  t.OnRouted(2, Predicted(kA, 9, 8), Ms(1000));
  EXPECT_EQ(t.WaitCorrection(kA, FromSeconds(3)), 1.0);  // not overdue yet
  EXPECT_NEAR(t.WaitCorrection(kA, FromSeconds(45)), (44 + 0.1) / (4 + 0.1), 1e-9);
  // Its first token ends the bound; the learned factor takes over.
  t.OnFirstToken(1, FromSeconds(46));
  const double learned = t.Calibration(kA).wait_correction;
  EXPECT_GT(learned, 1.5);
  EXPECT_LT(t.WaitCorrection(kA, FromSeconds(46)), 10.8);
  // A request that failed before its first token is forgotten, not learned from.
  t.OnDone(2, FromSeconds(47), false);
  EXPECT_EQ(t.Calibration(kA).samples, 1u);
  EXPECT_NEAR(t.WaitCorrection(kA, FromSeconds(500)), learned, 1e-12);
}

TEST(LoadTrackerCalibrationTest, TheFactorStaysWithinItsBounds) {
  LoadTracker t;
  for (RequestId id = 1; id <= 200; ++id) {
    const Nanos at = Ms(1e6 * static_cast<double>(id));
    t.OnRouted(id, Predicted(kA, 0.2, 0.1), at);
    t.OnFirstToken(id, at + FromSeconds(3000));
    t.OnDone(id, at + FromSeconds(3001), true);
  }
  EXPECT_DOUBLE_EQ(t.WaitCorrection(kA, Ms(0)), kMaxWaitCorrection);
  t.OnRouted(1000, Predicted(kA, 0.01, 0.001, kMaxWaitCorrection), Ms(0));
  EXPECT_DOUBLE_EQ(t.WaitCorrection(kA, FromSeconds(1e6)), kMaxWaitCorrection);
}

}  // namespace
}  // namespace kvroute::fleet
