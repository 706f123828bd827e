// The load terms of predicted TTFT (latency_model.h TtftTerms) and what they change in the
// default policy's choices. Without them a worker busy decoding, or with its KV nearly full,
// predicted the same TTFT as an idle one: on the Mooncake trace the default piled long
// prefills onto decoding workers (SLO attainment 0.33 vs llmd_sticky's 0.50) and on the
// shared-prefix workload it filled workers' KV until the engine preempted (TTFT p99 16-33 s).
#include <gtest/gtest.h>

#include <vector>

#include "sched/latency_model.h"
#include "sched/registry.h"
#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;
using testing::Worker;

// The default before the terms (scripts/study/predicted_latency_s3.yaml): the contrast that
// shows each test can fail.
constexpr char kBeforeYaml[] = R"(
name: before
filters:
  - {name: healthy}
  - {name: not_draining}
  - {name: model}
  - {name: itl_guard, itl_slo_s: 0.1, holder_threshold: 2, if_all_dropped: keep_all}
  - {name: prefix_affinity, threshold: 0.90, max_ttft_penalty_s: 5.0, if_all_dropped: keep_all}
scorers: [{name: predicted_ttft, decode_load: 0, kv_wait: 0}]
picker: {name: softmax, temperature: 0.0}
)";

// 10,000 prefill tokens/s; a step costs 10 ms + 1 ms per sequence + 1 µs per KV token.
WorkerSnapshot RatedWorker(WorkerId id) {
  WorkerSnapshot w = Worker(id);
  w.kv_capacity_blocks = 100000;
  w.prefill_tokens_per_s = 10000;
  w.decode_step = StepTimeModel{.base_s = 0.01, .per_sequence_s = 0.001, .per_kv_token_s = 1e-6};
  return w;
}

Decision Decide(const Policy& policy, const RequestProfile& r,
                const std::vector<WorkerSnapshot>& ws) {
  PolicyState state(5);
  auto d = policy.Decide(r, ws, state);
  EXPECT_TRUE(d.has_value()) << (d ? "" : d.error().message);
  return d ? *d : Decision{};
}

TEST(TtftTermsTest, DecodeBatchAddsItsMarginalStepTimePerPrefillChunk) {
  WorkerSnapshot w = RatedWorker(0);
  w.inflight_requests = 8;
  w.active_kv_blocks = 1000;  // 16,000 KV tokens
  RequestProfile r = Request(20000);
  const auto p = PredictTtft(r, View(0, 0), w, kFullTtftModel);
  ASSERT_TRUE(p.has_value()) << p.error();
  // ceil(20,000 / 8,192) = 3 chunk steps, each carrying 8 * 1 ms + 16,000 * 1 µs = 24 ms.
  EXPECT_NEAR(p->decode_s, 3 * 0.024, 1e-12);
  EXPECT_NEAR(p->prefill_s, 2.0, 1e-12);
  EXPECT_NEAR(p->total_s(), 2.072, 1e-12);
  // The queued prefill ahead of us shares the same steps: 30,000 more tokens, 6 steps in all.
  w.pending_prefill_tokens = 30000;
  EXPECT_NEAR(PredictTtft(r, View(0, 0), w, kFullTtftModel)->decode_s, 7 * 0.024, 1e-12);
}

TEST(TtftTermsTest, HeavierDecodeBatchPredictsALongerTtft) {
  WorkerSnapshot light = RatedWorker(0);
  light.inflight_requests = 2;
  WorkerSnapshot heavy = RatedWorker(1);
  heavy.inflight_requests = 32;
  heavy.active_kv_blocks = 20000;
  const RequestProfile r = Request(16000);
  const double t_light = PredictTtft(r, View(0, 0), light, kFullTtftModel)->total_s();
  const double t_heavy = PredictTtft(r, View(1, 0), heavy, kFullTtftModel)->total_s();
  // 2 steps: light 2 * 2 ms, heavy 2 * (32 ms + 320,000 * 1 µs).
  EXPECT_NEAR(t_light, 1.6 + 0.004, 1e-12);
  EXPECT_NEAR(t_heavy, 1.6 + 2 * 0.352, 1e-12);
}

TEST(TtftTermsTest, TermsOffGiveTheBasicPrediction) {
  WorkerSnapshot w = RatedWorker(0);
  w.inflight_requests = 8;
  w.active_kv_blocks = 99990;
  RequestProfile r = Request(20000);
  r.predicted_output_tokens = 100;
  const auto p = PredictTtft(r, View(0, 0), w);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->decode_s, 0);
  EXPECT_EQ(p->kv_wait_s, 0);
  EXPECT_NEAR(p->total_s(), 2.0, 1e-12);
}

TEST(TtftTermsTest, KvWaitIsTheDeficitInTurnoversOfTheCapacity) {
  WorkerSnapshot w = RatedWorker(0);
  w.kv_capacity_blocks = 10000;
  w.active_kv_blocks = 9900;
  w.inflight_requests = 10;
  w.decode_step->per_kv_token_s = 0;  // step 20 ms
  RequestProfile r = Request(8000);
  r.predicted_output_tokens = 500;
  // need = ceil(8,500 / 16) - 62 GPU blocks = 470; deficit = 9,900 + 470 - 10,000 = 370;
  // each turnover (500 steps of 20 ms) frees ~ the capacity: wait = 370 / 10,000 turnovers.
  const auto p = PredictTtft(r, View(0, 62), w, kFullTtftModel);
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_NEAR(p->kv_wait_s, 370.0 / 10000 * 500 * 0.02, 1e-12);
  // A queue for memory several batches deep waits several turnovers (issue 15: a cap at one
  // turnover made a worker with hundreds of requests queued look one batch away).
  w.active_kv_blocks = 40000;
  w.kv_capacity_blocks = 10000;
  EXPECT_NEAR(PredictTtft(r, View(0, 62), w, kFullTtftModel)->kv_wait_s,
              (40000.0 + 470 - 10000) / 10000 * 500 * 0.02, 1e-9);
  // With room for it: no wait.
  w.active_kv_blocks = 9000;
  EXPECT_EQ(PredictTtft(r, View(0, 62), w, kFullTtftModel)->kv_wait_s, 0);
}

TEST(TtftTermsTest, ScrapedUsageCapsTheRoutersBooking) {
  WorkerSnapshot w = RatedWorker(0);
  w.kv_capacity_blocks = 10000;
  w.active_kv_blocks = 9900;  // every request booked at its final size, shared prefix too
  w.pending_prefill_tokens = 1600;
  EXPECT_EQ(HeldKvBlocks(w, 16), 9900);
  w.scraped = ScrapedMetrics{.kv_usage = 0.5};
  EXPECT_NEAR(HeldKvBlocks(w, 16), 5000 + 100, 1e-9);  // engine's usage + the queued prefill
  w.scraped->kv_usage = 1.0;
  EXPECT_EQ(HeldKvBlocks(w, 16), 9900);  // never above the booking
}

TEST(TtftTermsTest, ATermThatAppliesWithoutADecodeModelIsAnError) {
  WorkerSnapshot w = RatedWorker(0);
  w.decode_step.reset();
  const RequestProfile r = Request(1000);
  EXPECT_TRUE(PredictTtft(r, View(0, 0), w, kFullTtftModel).has_value());  // idle: no term
  w.inflight_requests = 1;
  const auto p = PredictTtft(r, View(0, 0), w, kFullTtftModel);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().find("decode_step"), std::string::npos) << p.error();
}

TEST(TtftTermsTest, DefaultPrefersAnIdleWorkerOverOneBusyDecoding) {
  // Equal queues (no pending prefill) and no cache: only the decode batch differs. w0
  // decodes 24 sequences; before, both predicted 1.6 s, a tie the picker broke at random.
  std::vector<WorkerSnapshot> ws = {RatedWorker(0), RatedWorker(1)};
  ws[0].inflight_requests = 24;
  ws[0].active_kv_blocks = 1000;  // predicted ITL 67 ms: within the guard's 0.1 s
  const RequestProfile r = Request(16000);
  const Decision after = Decide(*BuiltinPolicy("predicted_latency").value(), r, ws);
  EXPECT_EQ(after.chosen, 1u);
  EXPECT_GT(after.Find(0)->costs[0], after.Find(1)->costs[0]);
  const Decision before = Decide(**Registry::Builtin().ParsePolicy(kBeforeYaml), r, ws);
  EXPECT_EQ(before.Find(0)->costs[0], before.Find(1)->costs[0]);
}

TEST(TtftTermsTest, DefaultPrefersRoomOverANearlyFullWorkerEvenWithAPrefixThere) {
  // w0 holds 62 blocks of the prompt (saves 0.1 s of prefill, and 0.2 s of the two running
  // requests' time: the default's decode_slowdown stall term) but its KV is 99 % booked: the
  // request waits ~1.1 s for blocks there (463 missing of 9,900 held, over 2,000 steps of
  // 12 ms). w1 has the same batch and room.
  std::vector<WorkerSnapshot> ws = {RatedWorker(0), RatedWorker(1)};
  for (WorkerSnapshot& w : ws) {
    w.kv_capacity_blocks = 10000;
    w.inflight_requests = 2;
    w.decode_step->per_kv_token_s = 0;
  }
  ws[0].active_kv_blocks = 9900;
  ws[1].active_kv_blocks = 5000;
  RequestProfile r = Request(8000);
  r.predicted_output_tokens = 2000;
  r.cache_views = {View(0, 62)};
  const Decision after = Decide(*BuiltinPolicy("predicted_latency").value(), r, ws);
  EXPECT_EQ(after.chosen, 1u);
  EXPECT_GT(after.Find(0)->costs[0], after.Find(1)->costs[0]);
  const Decision before = Decide(**Registry::Builtin().ParsePolicy(kBeforeYaml), r, ws);
  EXPECT_EQ(before.chosen, 0u);
}

TEST(TtftTermsTest, ScorerOptionsAreReadFromYaml) {
  auto p = Registry::Builtin().ParsePolicy(R"(
name: p
scorers: [{name: predicted_ttft, decode_load: 2, kv_wait: 0, chunk_tokens: 4096}]
picker: {name: argmin}
)");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  WorkerSnapshot w = RatedWorker(0);
  w.inflight_requests = 8;
  w.active_kv_blocks = 1000;
  const Decision d = Decide(**p, Request(8192), {w});
  // 2 steps of 4,096 tokens, 24 ms each, weight 2: 0.8192 s + 0.096 s.
  EXPECT_NEAR(d.Find(0)->costs[0], 0.8192 + 0.096, 1e-12);
  EXPECT_FALSE(Registry::Builtin()
                   .ParsePolicy("name: p\nscorers: [{name: predicted_ttft, kv_wait: -1}]\n"
                                "picker: {name: argmin}\n")
                   .has_value());
}

}  // namespace
}  // namespace kvroute::sched
