// The decode-slowdown term (latency_model.h PredictDecodeSlowdown, scorer `decode_slowdown`)
// and what it changes in the default policy's choices. Without it the default placed a new
// session by TTFT alone: the worker holding the common prefix and decoding another session
// beat an idle worker that must prefill the whole prompt, so at c = 2-8 sessions doubled up
// while workers idled (live, session 4: ITL p50 24.2 vs 19.7 ms for round robin at c = 8).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched/latency_model.h"
#include "sched/registry.h"
#include "sched/scorers.h"
#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;
using testing::Worker;

// The default preset without the term: the contrast that shows each policy test can fail.
constexpr char kWithoutTermYaml[] = R"(
name: without_decode_slowdown
filters:
  - {name: healthy}
  - {name: not_draining}
  - {name: model}
  - {name: itl_guard, itl_slo_s: 0.1, holder_threshold: 0.90, holder_max_itl_factor: 1.25,
     if_all_dropped: keep_all}
  - {name: prefix_affinity, threshold: 0.90, max_ttft_penalty_s: 5.0, if_all_dropped: keep_all}
scorers: [{name: predicted_ttft, decode_load: 1.0, kv_wait: 1.0, chunk_tokens: 8192}]
picker: {name: softmax, temperature: 0.0}
)";

// A step costs 12 ms + 0.1 ms per sequence + 50 ns per KV token (~ the default profile:
// 32k tokens of context add 1.6 ms).
StepTimeModel Step() {
  return StepTimeModel{.base_s = 0.012, .per_sequence_s = 1e-4, .per_kv_token_s = 5e-8};
}

WorkerSnapshot RatedWorker(WorkerId id, double prefill_tokens_per_s) {
  WorkerSnapshot w = Worker(id);
  w.kv_capacity_blocks = 40000;
  w.prefill_tokens_per_s = prefill_tokens_per_s;
  w.decode_step = Step();
  return w;
}

RequestProfile Turn(std::uint64_t prompt_tokens) {
  RequestProfile r = Request(prompt_tokens);
  r.predicted_output_tokens = 900;
  return r;
}

TEST(DecodeSlowdownTest, AnIdleWorkerAddsNothing) {
  const auto d = PredictDecodeSlowdown(Turn(32000), View(0, 0), RatedWorker(0, 1e4));
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_DOUBLE_EQ(d->own_s, 0);
  EXPECT_DOUBLE_EQ(d->others_s, 0);
}

TEST(DecodeSlowdownTest, OwnSlowdownIsTheBatchAndKvJoinedTimesThePredictedOutput) {
  WorkerSnapshot w = RatedWorker(0, 1e4);
  w.inflight_requests = 2;
  w.active_kv_blocks = 4000;  // 64,000 KV tokens
  const auto d = PredictDecodeSlowdown(Turn(32000), View(0, 0), w, {.others_share = 0, .stall = 0});
  ASSERT_TRUE(d.has_value()) << d.error();
  // step(3, 64,000 + ctx) - step(1, ctx) = 2 * 0.1 ms + 64,000 * 50 ns = 3.4 ms per token.
  EXPECT_NEAR(d->own_s, 900 * 0.0034, 1e-9);
  EXPECT_DOUBLE_EQ(d->others_s, 0);
}

TEST(DecodeSlowdownTest, RunningRequestsAreChargedOurContextForTheirOverlappingShare) {
  WorkerSnapshot w = RatedWorker(0, 1e4);
  w.inflight_requests = 2;
  w.active_kv_blocks = 4000;
  const auto d =
      PredictDecodeSlowdown(Turn(32000), View(0, 0), w, {.others_share = 0.5, .stall = 0});
  ASSERT_TRUE(d.has_value()) << d.error();
  // Each of the 2 pays 0.1 ms + (32,000 + 450) * 50 ns = 1.7225 ms per step for 450 steps.
  EXPECT_NEAR(d->others_s, 0.5 * 900 * 2 * (1e-4 + 32450 * 5e-8), 1e-9);
}

TEST(DecodeSlowdownTest, RunningRequestsWaitOurRecomputeOncePerChunkStepTheyShare) {
  WorkerSnapshot w = RatedWorker(0, 1e4);
  w.inflight_requests = 3;
  // 20,000 of 32,000 tokens held on the GPU: 12,000 to recompute, 1.2 s at 10,000 tok/s.
  const auto d = PredictDecodeSlowdown(Turn(32000), View(0, 1250), w, {.others_share = 0});
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_NEAR(d->stall_s, 3 * 1.2, 1e-9);
}

// Requests routed to the worker whose first token has not come yet share a step with our first
// chunk: each waits for our tokens in that step.
TEST(DecodeSlowdownTest, RequestsWaitingForTheirFirstTokenWaitForOurShareOfTheirLastStep) {
  WorkerSnapshot w = RatedWorker(0, 1e4);
  w.inflight_requests = 3;
  w.pending_prefill_requests = 2;
  w.pending_prefill_tokens = 2192;  // 6,000 tokens of a 8,192 budget left for us
  const SlowdownTerms terms{.others_share = 0, .stall = 0, .pending = 1, .chunk_tokens = 8192};
  // 12,000 tokens to recompute, 6,000 of them in the step the two waiting requests end in.
  auto d = PredictDecodeSlowdown(Turn(32000), View(0, 1250), w, terms);
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_NEAR(d->pending_s, 2 * 0.6, 1e-9);
  // A short prompt shares all of itself: 160 tokens (of a 992-token prompt, 52 blocks held).
  d = PredictDecodeSlowdown(Turn(992), View(0, 52), w, terms);
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_NEAR(d->pending_s, 2 * 160 / 1e4, 1e-9);
  // More than a step queued ahead: the waiting requests end in earlier steps but the last.
  w.pending_prefill_tokens = 8192 + 8000;
  d = PredictDecodeSlowdown(Turn(32000), View(0, 1250), w, terms);
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_NEAR(d->pending_s, 1 * 192 / 1e4, 1e-9);
  // Off by default, and nothing to wait for when nobody is waiting.
  d = PredictDecodeSlowdown(Turn(32000), View(0, 1250), w, {.others_share = 0, .stall = 0});
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_EQ(d->pending_s, 0);
  w.pending_prefill_requests = 0;
  w.pending_prefill_tokens = 0;
  d = PredictDecodeSlowdown(Turn(32000), View(0, 1250), w, terms);
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_EQ(d->pending_s, 0);
}

TEST(DecodeSlowdownTest, ANegativeFittedCoefficientNeverMakesAPlacementAGain) {
  WorkerSnapshot w = RatedWorker(0, 1e4);
  w.decode_step = StepTimeModel{.base_s = 0.02, .per_sequence_s = -1e-3, .per_kv_token_s = 0};
  w.inflight_requests = 4;
  // The whole prompt is cached (62 blocks), so there is nothing to stall the batch either.
  const auto d = PredictDecodeSlowdown(Turn(992), View(0, 62), w);
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_DOUBLE_EQ(d->total_s(), 0);
}

TEST(DecodeSlowdownTest, ScorerReportsAMissingDecodeModelNamingTheWorker) {
  WorkerSnapshot w = RatedWorker(0, 1e4);
  w.decode_step.reset();
  auto scorer = NewDecodeSlowdownScorer();
  const RequestProfile r = Turn(1000);
  const std::vector<Candidate> rows{Candidate{.worker = &w, .cache = View(0, 0)}};
  auto costs = scorer->Score(r, rows);
  ASSERT_FALSE(costs.has_value());
  EXPECT_EQ(costs.error().code, SchedError::Code::kMissingInput);
  EXPECT_NE(costs.error().message.find("w0"), std::string::npos) << costs.error().message;
}

TEST(DecodeSlowdownTest, ScorerReportsAMissingPrefillRateWhenTheStallTermNeedsIt) {
  WorkerSnapshot w = RatedWorker(0, 1e4);
  w.prefill_tokens_per_s.reset();
  w.inflight_requests = 1;
  auto scorer = NewDecodeSlowdownScorer();
  const RequestProfile r = Turn(1000);
  const std::vector<Candidate> rows{Candidate{.worker = &w, .cache = View(0, 0)}};
  auto costs = scorer->Score(r, rows);
  ASSERT_FALSE(costs.has_value());
  EXPECT_NE(costs.error().message.find("prefill_tokens_per_s"), std::string::npos)
      << costs.error().message;
}

TEST(DecodeSlowdownTest, RegistryRejectsAnOthersShareAboveOne) {
  auto p = Registry::Builtin().ParsePolicy(R"(
scorers: [{name: decode_slowdown, others_share: 1.5}]
picker: {name: argmin}
)");
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().message.find("others_share"), std::string::npos) << p.error().message;
}

class DefaultPlacementTest : public ::testing::Test {
 protected:
  Decision Decide(const Policy& policy, const RequestProfile& r) {
    PolicyState state(5);
    auto d = policy.Decide(r, workers_, state);
    EXPECT_TRUE(d.has_value()) << (d ? "" : d.error().message);
    return d ? *d : Decision{};
  }
  std::shared_ptr<const Policy> Default() { return BuiltinPolicy("predicted_latency").value(); }
  std::shared_ptr<const Policy> WithoutTerm() {
    return Registry::Builtin().ParsePolicy(kWithoutTermYaml).value();
  }

  // Worker 0 holds the 20,000-token common prefix and decodes one 33,600-token session; its
  // prefill rate is learned (20,000 tok/s), worker 1 is idle on its seed rate (14,000 tok/s):
  // the live state at the start of a c = 2 level.
  std::vector<WorkerSnapshot> workers_ = [] {
    std::vector<WorkerSnapshot> ws{RatedWorker(0, 20000), RatedWorker(1, 14000)};
    ws[0].inflight_requests = 1;
    ws[0].active_kv_blocks = 2100;
    return ws;
  }();
};

TEST_F(DefaultPlacementTest, ANewSessionJoinsTheCommonPrefixHolderWithinTheDerivedBound) {
  // Turn 0 of a session: 32,000 tokens, 1,250 blocks (0.625) of them on worker 0. TTFT:
  // worker 0 0.6 s, worker 1 2.3 s; decode slowdown on worker 0: own 900 * 1.78 ms = 1.6 s,
  // the running session 450 * 1.72 ms = 0.8 s. The slowdown alone would send it to the idle
  // worker 1; the default's prefix_affinity (threshold 0.20, derived bound) keeps worker 0,
  // whose TTFT is within the 1.4 s of recompute it saves of the idle one's (issue 15: on the
  // matrix the stickier default served more SLO-compliant requests than the 0.90 threshold).
  std::vector<CacheView> views{View(0, 1250), View(1, 0)};
  RequestProfile r = Turn(32000);
  r.cache_views = views;
  EXPECT_EQ(Decide(*WithoutTerm(), r).chosen, WorkerId{0});
  EXPECT_EQ(Decide(*Default(), r).chosen, WorkerId{0});
}

TEST_F(DefaultPlacementTest, ANewSessionStillJoinsTheHolderWhenTheIdleWorkersPrefillIsLonger) {
  // The same, with a 100,000-token prompt whose first 90,000 tokens worker 0 holds: moving
  // costs 7.1 s of prefill, more than the 2.8 s of slowdown it saves.
  std::vector<CacheView> views{View(0, 5625), View(1, 0)};
  RequestProfile r = Turn(100000);
  r.cache_views = views;
  EXPECT_EQ(Decide(*Default(), r).chosen, WorkerId{0});
}

TEST_F(DefaultPlacementTest, AFollowUpTurnStaysWithTheSessionsHolder) {
  // A follow-up (31,000 of 33,600 tokens held, 0.92 >= the affinity threshold): hysteresis
  // keeps the session where its KV is; the slowdown term ranks only what the filters kept.
  std::vector<CacheView> views{View(0, 1950), View(1, 0)};
  RequestProfile r = Turn(33600);
  r.cache_views = views;
  EXPECT_EQ(Decide(*Default(), r).chosen, WorkerId{0});
}

// The `pending` term (off in the default preset: on the policy matrix it traded cells, see
// docs/bench/policy-matrix.md): a long prompt is not put on the worker that was just given a
// short one, whose first token would then wait for the long prefill's first chunk. Worker 0
// decodes 4 requests and has just been routed a 400-token prompt; worker 1 decodes 6. By its
// own TTFT and slowdown the 8,000-token prompt costs less on worker 0 (fewer decodes; 20 ms of
// queue): the policy without the term sends it there. The term charges worker 0 the short
// request's wait for the 7,792 tokens of ours in its step (0.39 s at 20,000 tok/s).
TEST_F(DefaultPlacementTest, ThePendingTermKeepsALongPromptOffAShortOneWaitingForItsFirstToken) {
  std::vector<WorkerSnapshot> ws{RatedWorker(0, 20000), RatedWorker(1, 20000)};
  ws[0].inflight_requests = 5;
  ws[0].pending_prefill_requests = 1;
  ws[0].pending_prefill_tokens = 400;
  ws[0].active_kv_blocks = 4 * 300;
  ws[1].inflight_requests = 6;
  ws[1].active_kv_blocks = 6 * 300;
  RequestProfile r = Turn(8000);
  r.predicted_output_tokens = 100;
  r.cache_views = {View(0, 0), View(1, 0)};
  const auto policy = [](const char* pending) {
    return Registry::Builtin().ParsePolicy(std::string(R"(
name: with_or_without_pending
filters: [{name: healthy}]
scorers:
  - {name: predicted_ttft, decode_load: 1.0, kv_wait: 1.0, chunk_tokens: 8192}
  - {name: decode_slowdown, others_share: 0.5, stall: 0.1, chunk_tokens: 8192, pending: )") +
                                           pending + R"(}
picker: {name: softmax, temperature: 0.0}
)");
  };
  auto without = policy("0");
  auto with = policy("1");
  ASSERT_TRUE(without.has_value()) << without.error().message;
  ASSERT_TRUE(with.has_value()) << with.error().message;
  PolicyState state(5);
  auto d = (*without)->Decide(r, ws, state);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  EXPECT_EQ(d->chosen, WorkerId{0});
  EXPECT_EQ(Default()->Decide(r, ws, state)->chosen, WorkerId{0});  // the default: term off
  d = (*with)->Decide(r, ws, state);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  EXPECT_EQ(d->chosen, WorkerId{1});
}

}  // namespace
}  // namespace kvroute::sched
