// The load terms of predicted TTFT (latency_model.h TtftTerms) and what they change in the
// default policy's choices. Without them a worker busy decoding, or with its KV nearly full,
// predicted the same TTFT as an idle one: on the Mooncake trace the default piled long
// prefills onto decoding workers (SLO attainment 0.33 vs llmd_sticky's 0.50) and on the
// shared-prefix workload it filled workers' KV until the engine preempted (TTFT p99 16-33 s).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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

// A worker that moves 1e9 bytes/s from the store, 1e6 bytes a block.
WorkerSnapshot StoreWorker(WorkerId id) {
  WorkerSnapshot w = RatedWorker(id);
  w.kv_bytes_per_block = 1e6;
  w.tier_load_bytes_per_s[static_cast<int>(Tier::kCpu)] = 1e10;
  w.tier_load_bytes_per_s[static_cast<int>(Tier::kShared)] = 1e9;
  return w;
}

TEST(TtftTermsTest, TierQueueIsThePathBacklogBeyondThePrefillQueue) {
  constexpr int kShared = static_cast<int>(Tier::kShared);
  WorkerSnapshot w = StoreWorker(0);
  RequestProfile r = Request(1616);                   // 101 full blocks
  const CacheView store_hit = View(0, 0, 0, 0, 100);  // 100 blocks = 1e8 bytes: 0.1 s to load
  w.pending_tier_load_bytes[kShared] = 5e8;           // 0.5 s of loads ahead on the same path
  auto p = PredictTtft(r, store_hit, w, kFullTtftModel);
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_NEAR(p->load_s, 0.1, 1e-12);
  EXPECT_NEAR(p->tier_queue_s, 0.5, 1e-12);  // its load ends at 0.6 s, not 0.1 s
  EXPECT_NEAR(p->wait_s(), 0.5, 1e-12);      // a wait: the calibration compares it
  // The prefill queue drains meanwhile: 2,000 tokens at 10,000/s hide 0.2 s of it.
  w.pending_prefill_tokens = 2000;
  p = PredictTtft(r, store_hit, w, kFullTtftModel);
  EXPECT_NEAR(p->queue_s, 0.2, 1e-12);
  EXPECT_NEAR(p->tier_queue_s, 0.3, 1e-12);
  // A backlog on a path this request does not read, or the term off: nothing.
  w.pending_tier_load_bytes = {};
  w.pending_tier_load_bytes[static_cast<int>(Tier::kCpu)] = 5e9;
  EXPECT_EQ(PredictTtft(r, store_hit, w, kFullTtftModel)->tier_queue_s, 0);
  w.pending_tier_load_bytes[kShared] = 5e8;
  EXPECT_EQ(PredictTtft(r, store_hit, w, TtftTerms{})->tier_queue_s, 0);
  // A GPU hit loads nothing and waits for no path.
  EXPECT_EQ(PredictTtft(r, View(0, 100), w, kFullTtftModel)->tier_queue_s, 0);
  // The backlog is a transfer time, not a model error: the wait correction leaves it as is.
  w.pending_prefill_tokens = 0;
  w.wait_correction = 10;
  EXPECT_NEAR(PredictTtft(r, store_hit, w, kFullTtftModel)->tier_queue_s, 0.5, 1e-12);
  // Unusable pending bytes count as none; the prediction stays finite.
  w.pending_tier_load_bytes[kShared] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(PredictTtft(r, store_hit, w, kFullTtftModel)->tier_queue_s, 0);
  w.pending_tier_load_bytes[kShared] = 1e300;
  EXPECT_TRUE(std::isfinite(PredictTtft(r, store_hit, w, kFullTtftModel)->total_s()));
}

TEST(TtftTermsTest, DefaultSendsAStoreHitAwayFromAWorkerWhoseStorePathIsBackedUp) {
  // Both workers can load the prompt from the store and are otherwise the same; w0 has 3 s
  // of store loads routed ahead of this one. Without the term both predicted the same TTFT.
  std::vector<WorkerSnapshot> ws = {StoreWorker(0), StoreWorker(1)};
  ws[0].pending_tier_load_bytes[static_cast<int>(Tier::kShared)] = 3e9;
  ws[0].inflight_requests = ws[1].inflight_requests = 3;
  RequestProfile r = Request(1616);
  r.cache_views = {View(0, 0, 0, 0, 100), View(1, 0, 0, 0, 100)};
  const Decision d = Decide(*BuiltinPolicy("predicted_latency").value(), r, ws);
  EXPECT_EQ(d.chosen, 1u) << RenderDecision(d);
  auto scored = [&](double tier_queue) {
    return Decide(**Registry::Builtin().ParsePolicy(
                      fmt::format("name: p\nscorers: [{{name: predicted_ttft, tier_queue: {}}}]\n"
                                  "picker: {{name: argmin}}\n",
                                  tier_queue)),
                  r, ws);
  };
  const Decision on = scored(1), off = scored(0);
  EXPECT_NEAR(on.Find(0)->costs[0] - on.Find(1)->costs[0], 3.0, 1e-9);  // 3 s of backlog
  EXPECT_EQ(off.Find(0)->costs[0], off.Find(1)->costs[0]);
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
