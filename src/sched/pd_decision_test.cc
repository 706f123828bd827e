// The P/D split decision (pd_decision.h): each side of the cost-based decision (the split
// pays / does not pay), each preset's rule, and properties over random fleets (finite costs;
// the choice is never beaten by an option that uses an idle decode worker; ids, not row
// order, break ties).
#include "sched/pd_decision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;

// Rates of the Kimi-class fleet's shape (orders of magnitude only): a TP2 decode engine,
// a TP4 prefill engine, 1.1 MB per block pulled, 49.5 GB/s per lane, 1 ms latency.
WorkerSnapshot Engine(WorkerId id, Role role, std::uint32_t tp, double prefill_rate) {
  WorkerSnapshot w = testing::Worker(id);
  w.role = role;
  w.tp = w.gpus = tp;
  w.kv_capacity_blocks = 100000;
  w.prefill_tokens_per_s = prefill_rate;
  w.decode_step = StepTimeModel{.base_s = 0.015, .per_sequence_s = 0.0002, .per_kv_token_s = 2e-9};
  w.kv_bytes_per_block = 1.1e6;
  w.kv_transfer_bytes_per_block = 1.1e6;
  w.kv_link_bytes_per_s = 49.5e9;
  w.kv_link_latency_s = 0.001;
  return w;
}
WorkerSnapshot Decode(WorkerId id) { return Engine(id, Role::kDecode, 2, 20000); }
WorkerSnapshot Prefill(WorkerId id) { return Engine(id, Role::kPrefill, 4, 40000); }

// D decoding a batch: `batch` requests holding `kv_blocks`.
WorkerSnapshot Busy(WorkerSnapshot w, std::uint32_t batch, std::uint64_t kv_blocks) {
  w.inflight_requests = batch;
  w.active_kv_blocks = kv_blocks;
  return w;
}

RequestProfile Turn(std::uint64_t prompt, std::uint64_t output = 900) {
  RequestProfile r = Request(prompt);
  r.predicted_output_tokens = output;
  return r;
}

PdDecision Decide(const RequestProfile& r, const std::vector<WorkerSnapshot>& ws,
                  const PdOptions& o = {}) {
  auto d = DecidePd(r, ws, o);
  EXPECT_TRUE(d.has_value()) << d.error();
  return d.value_or(PdDecision{});
}

// A new 30k-token session on a fleet whose decode workers all run 24 decodes: prefilling it
// locally stalls each of them for the whole prefill; the prefill worker is idle and the link
// fast, so the split pays.
TEST(PdDecisionTest, SplitPaysForALongUncachedPromptOnABusyDecodeWorker) {
  std::vector<WorkerSnapshot> ws = {Prefill(0), Busy(Decode(1), 24, 24 * 2500),
                                    Busy(Decode(2), 24, 24 * 2500)};
  const RequestProfile r = Turn(30000);
  const PdDecision d = Decide(r, ws);
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_TRUE(d.chosen->split) << d.reason;
  EXPECT_EQ(d.chosen->prefill, 0u);
  EXPECT_EQ(d.chosen->transfer_blocks, (30000 + 15) / 16);  // D holds nothing: it pulls all
  ASSERT_TRUE(d.best_aggregated.has_value());
  EXPECT_LT(d.chosen->cost_s(), d.best_aggregated->cost_s());
  // The split's TTFT includes the transfer at D's link: latency + bytes / (2 lanes × bw).
  const double bytes = 1875 * 1.1e6;
  EXPECT_DOUBLE_EQ(d.chosen->transfer_bytes, bytes);
  EXPECT_DOUBLE_EQ(d.chosen->transfer_s, 0.001 + bytes / (2 * 49.5e9));
  // The prefill leg's own prediction (what P's calibration is fed): the split TTFT less the
  // transfer and D's part.
  EXPECT_GT(d.chosen->prefill_ttft_s, 0);
  EXPECT_LT(d.chosen->prefill_ttft_s + d.chosen->transfer_s, d.chosen->ttft_s + 1e-12);
  EXPECT_EQ(d.chosen->prefill_wait_s, 0);  // P is idle
  // With stall 1 (each decode waits the whole local prefill) the margin only grows.
  PdOptions full_stall;
  full_stall.slowdown.stall = 1;
  EXPECT_GT(Decide(r, ws, full_stall).best_aggregated->cost_s(), d.best_aggregated->cost_s());
}

// A follow-up turn: D holds 28k of the 30k-token prompt (it decoded the previous turns), so
// a local prefill is 2k tokens; the prefill worker holds only the 20k shared prefix and would
// recompute 10k, and the pull would move 2k tokens' blocks. With D idle (no decode to stall)
// aggregated is cheaper; with D decoding 4 requests, a local 2k prefill stalls each of them
// about 0.1 s, more than the split's extra TTFT — and the split then decodes on the idle
// decode worker, since pulling the whole prompt over 2 × 49.5 GB/s takes ~22 ms — unless the
// prefill worker has a queue: then a local prefill wins (on the idle decode worker: 1.5 s of
// prefill there costs less than sharing worker 1's batch for 900 tokens plus its stall).
TEST(PdDecisionTest, SplitDoesNotPayForAFollowUpTurnItsIdleDecodeWorkerHolds) {
  std::vector<WorkerSnapshot> ws = {Prefill(0), Decode(1), Decode(2)};
  RequestProfile r = Turn(30000);
  r.cache_views = {View(0, 20000 / 16), View(1, 28000 / 16)};
  const PdDecision d = Decide(r, ws);
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_FALSE(d.chosen->split) << d.reason;
  EXPECT_EQ(d.chosen->decode, 1u);
  ASSERT_TRUE(d.best_split.has_value());
  EXPECT_LT(d.chosen->cost_s(), d.best_split->cost_s());
  EXPECT_EQ(d.best_split->decode, 1u);  // a split would still decode where the session is
  EXPECT_EQ(d.best_split->transfer_blocks, 1875u - 1750u);  // only the blocks D lacks

  ws[1] = Busy(ws[1], 4, 4 * 2500);
  const PdDecision busy = Decide(r, ws);
  EXPECT_TRUE(busy.chosen->split) << busy.reason;
  EXPECT_EQ(busy.chosen->decode, 2u);
  EXPECT_EQ(busy.chosen->transfer_blocks, 1875u);
  ws[0].pending_prefill_tokens = 100000;  // 2.5 s of prefill queued on P
  const PdDecision queued = Decide(r, ws);
  EXPECT_FALSE(queued.chosen->split) << queued.reason;
  EXPECT_EQ(queued.chosen->decode, 2u) << queued.reason;
}

// The queue behind a split (pd_decision.h): the follow-up turn above, its decode worker busy,
// splits (onto the idle decode worker) while the prefill worker's queue is short in tokens;
// when that queue is many requests (short prompts, ~0.03 s of prefill in all), each of them
// stands for one that will wait behind this prompt's 10k-token recompute on P, and a local
// prefill wins. A 30k-token new session on busy
// decoders still splits with one request waiting on P: its local prefill stalls 24 decodes.
TEST(PdDecisionTest, TheQueueASplitLeavesBehindOnThePrefillWorkerIsCharged) {
  std::vector<WorkerSnapshot> ws = {Prefill(0), Busy(Decode(1), 4, 4 * 2500), Decode(2)};
  RequestProfile r = Turn(30000);
  r.cache_views = {View(0, 20000 / 16), View(1, 28000 / 16)};
  ws[0].inflight_requests = ws[0].pending_prefill_requests = 8;
  ws[0].pending_prefill_tokens = 8 * 150;
  const PdDecision d = Decide(r, ws);
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_FALSE(d.chosen->split) << d.reason;
  ASSERT_TRUE(d.best_split.has_value());
  // The term: 8 waiting × the prefill leg's own prefill seconds on P.
  auto p = PredictTtft(r, r.cache_views[0], ws[0], PdOptions{}.ttft);
  ASSERT_TRUE(p.has_value());
  EXPECT_GT(d.best_split->behind_s, 0);
  EXPECT_NEAR(d.best_split->behind_s, 8 * p->prefill_s, 1e-9);
  EXPECT_EQ(d.chosen->behind_s, 0);  // nothing waits on the decode workers
  // Off, the myopic rule splits it (the case above).
  PdOptions off;
  off.queue_behind = 0;
  const PdDecision myopic = Decide(r, ws, off);
  EXPECT_TRUE(myopic.chosen->split) << myopic.reason;
  EXPECT_EQ(myopic.chosen->behind_s, 0);

  std::vector<WorkerSnapshot> busy = {Prefill(0), Busy(Decode(1), 24, 24 * 2500),
                                      Busy(Decode(2), 24, 24 * 2500)};
  busy[0].inflight_requests = busy[0].pending_prefill_requests = 1;
  busy[0].pending_prefill_tokens = 150;
  const PdDecision fresh = Decide(Turn(30000), busy);
  EXPECT_TRUE(fresh.chosen->split) << fresh.reason;
  EXPECT_GT(fresh.chosen->behind_s, 0);
}

// The same new session as above, but the link is a slow one: the transfer costs more than
// the stall, so the split does not pay any more.
TEST(PdDecisionTest, ASlowLinkMakesTheSplitNotPay) {
  std::vector<WorkerSnapshot> ws = {Prefill(0), Busy(Decode(1), 24, 24 * 2500)};
  ws[1].kv_link_bytes_per_s = 1e6;  // 1 MB/s: ~17 min for 2 GB
  const PdDecision d = Decide(Turn(30000), ws);
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_FALSE(d.chosen->split) << d.reason;
}

// A decode worker whose link bandwidth was learned low (pulls queue on its NICs) loses split
// requests to one whose link is fast.
TEST(PdDecisionTest, TheLearnedLinkBandwidthChoosesTheDecodeWorker) {
  std::vector<WorkerSnapshot> ws = {Prefill(0), Busy(Decode(1), 24, 24 * 2500),
                                    Busy(Decode(2), 24, 24 * 2500)};
  ws[1].kv_link_bytes_per_s = 0.5e9;
  const PdDecision d = Decide(Turn(30000), ws);
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_TRUE(d.chosen->split);
  EXPECT_EQ(d.chosen->decode, 2u);
}

TEST(PdDecisionTest, RolesDecideWhoTakesWhichLeg) {
  const std::string m = testing::kModel;
  EXPECT_FALSE(CanAggregate(Prefill(0), m));
  EXPECT_TRUE(CanPrefillLeg(Prefill(0), m));
  EXPECT_FALSE(CanDecodeLeg(Prefill(0), m));
  EXPECT_TRUE(CanAggregate(Decode(1), m));  // a decode worker may prefill locally
  EXPECT_FALSE(CanPrefillLeg(Decode(1), m));
  WorkerSnapshot no_link = Decode(1);
  no_link.kv_link_bytes_per_s.reset();
  EXPECT_FALSE(CanDecodeLeg(no_link, m));
  WorkerSnapshot sick = Decode(1);
  sick.healthy = false;
  EXPECT_FALSE(CanAggregate(sick, m));
  // Only prefill workers: nothing can decode.
  const PdDecision d = Decide(Turn(1000), {Prefill(0), Prefill(1)});
  EXPECT_FALSE(d.chosen.has_value());
  EXPECT_NE(d.why_none.find("decode"), std::string::npos);
  // A mixed worker is never its own split partner: one mixed worker serves aggregated.
  WorkerSnapshot mixed = Engine(0, Role::kMixed, 2, 20000);
  const PdDecision alone = Decide(Turn(30000), {Busy(mixed, 24, 60000)});
  ASSERT_TRUE(alone.chosen.has_value());
  EXPECT_FALSE(alone.chosen->split);
}

// The options behind a choice (what /debug/route shows): kCost prices aggregated on every
// worker that can decode and the cheapest split per decode worker, cheapest first, the chosen
// one first of all; a preset lists its numbers (uncached tokens, threshold) too.
TEST(PdDecisionTest, EveryPricedOptionIsListedCheapestFirst) {
  std::vector<WorkerSnapshot> ws = {Prefill(0), Busy(Decode(1), 24, 24 * 2500),
                                    Busy(Decode(2), 24, 24 * 2500)};
  const PdDecision d = Decide(Turn(30000), ws);
  ASSERT_TRUE(d.chosen.has_value());
  ASSERT_EQ(d.options.size(), 4u);  // aggregated on 1 and 2; split 0->1 and 0->2
  EXPECT_EQ(d.options.front().split, d.chosen->split);
  EXPECT_EQ(d.options.front().decode, d.chosen->decode);
  int splits = 0;
  for (std::size_t i = 0; i < d.options.size(); ++i) {
    if (d.options[i].split) {
      ++splits;
      EXPECT_EQ(d.options[i].prefill, 0u);
    }
    if (i > 0) {
      EXPECT_LE(d.options[i - 1].cost_s(), d.options[i].cost_s());
    }
  }
  EXPECT_EQ(splits, 2);
  EXPECT_FALSE(d.preset_threshold_tokens.has_value());
  const PdDecision cap = Decide(Turn(6000), ws, PdOptions{.rule = PdRule::kTokenCap});
  EXPECT_EQ(cap.preset_threshold_tokens, 5000u);
  EXPECT_EQ(cap.preset_uncached_tokens, 6000u);
  EXPECT_EQ(cap.options.size(), 3u);  // both aggregated options and the chosen D's split
}

// Dynamo's token cap: the decode worker (the cheapest aggregated option) prefills locally
// up to `token_cap` uncached tokens, splits above it.
TEST(PdDecisionTest, DynamoTokenCapSplitsOnlyAboveTheCap) {
  std::vector<WorkerSnapshot> ws = {Prefill(0), Decode(1)};
  PdOptions o{.rule = PdRule::kTokenCap};
  EXPECT_EQ(o.token_cap, 5000u);
  EXPECT_FALSE(Decide(Turn(5000), ws, o).chosen->split);
  const PdDecision above = Decide(Turn(5008), ws, o);
  EXPECT_TRUE(above.chosen->split) << above.reason;
  EXPECT_EQ(above.chosen->decode, 1u);
  // Cached tokens on D do not count: 20k prompt with 16k held → 4k uncached → local.
  RequestProfile r = Turn(20000);
  r.cache_views = {View(1, 16000 / 16)};
  EXPECT_FALSE(Decide(r, ws, o).chosen->split);
  // Even where the split is far cheaper (D busy), the cap alone decides.
  std::vector<WorkerSnapshot> busy = {Prefill(0), Busy(Decode(1), 64, 64 * 2500)};
  const PdDecision cost = Decide(Turn(4000), busy);
  const PdDecision cap = Decide(Turn(4000), busy, o);
  EXPECT_TRUE(cost.chosen->split);
  EXPECT_FALSE(cap.chosen->split);
}

// llm-d's prefix-based decider: split at ≥ nonCachedTokens uncached tokens; 0 = never.
TEST(PdDecisionTest, LlmdNonCachedTokensSplitsAtTheThresholdAndZeroMeansNever) {
  std::vector<WorkerSnapshot> ws = {Prefill(0), Decode(1)};
  PdOptions never{.rule = PdRule::kNonCachedTokens};
  EXPECT_FALSE(Decide(Turn(60000), ws, never).chosen->split);
  PdOptions o{.rule = PdRule::kNonCachedTokens, .non_cached_tokens = 512};
  EXPECT_FALSE(Decide(Turn(511), ws, o).chosen->split);
  EXPECT_TRUE(Decide(Turn(512), ws, o).chosen->split);
  // No decode link: the split is wanted but impossible; aggregated, and the reason says so.
  ws[1].kv_link_bytes_per_s.reset();
  const PdDecision d = Decide(Turn(4096), ws, o);
  EXPECT_FALSE(d.chosen->split);
  EXPECT_NE(d.reason.find("split wanted"), std::string::npos) << d.reason;
}

TEST(PdDecisionTest, RuleNamesRoundTrip) {
  for (PdRule r : {PdRule::kCost, PdRule::kTokenCap, PdRule::kNonCachedTokens}) {
    EXPECT_EQ(ParsePdRule(PdRuleName(r)), r);
  }
  EXPECT_FALSE(ParsePdRule("dynamo").has_value());
}

// An ITL SLO drops options whose decode worker would exceed it: the busy worker's
// aggregated option and split options onto it lose to the idle decode worker.
TEST(PdDecisionTest, ItlSloDropsOverloadedDecodeWorkersUnlessAllAre) {
  std::vector<WorkerSnapshot> ws = {Prefill(0), Busy(Decode(1), 200, 1000), Busy(Decode(2), 200, 1000)};
  ws[2].decode_step->base_s = 0.03;  // a slower engine
  RequestProfile r = Turn(2000);
  r.itl_slo_s = 0.058;  // worker 1: 0.015 + 201 × 0.0002 + … ≈ 0.055; worker 2 ≈ 0.070
  const PdDecision d = Decide(r, ws);
  ASSERT_TRUE(d.chosen.has_value());
  EXPECT_EQ(d.chosen->decode, 1u);
  r.itl_slo_s = 0.01;  // nobody meets it: all kept, and said
  const PdDecision none = Decide(r, ws);
  ASSERT_TRUE(none.chosen.has_value());
  EXPECT_NE(none.reason.find("ITL SLO"), std::string::npos) << none.reason;
}

TEST(PdDecisionTest, UnusableLinkInputsAreErrorsNamingTheWorker) {
  std::vector<WorkerSnapshot> ws = {Prefill(0), Decode(1)};
  ws[1].kv_link_bytes_per_s = std::nan("");
  auto d = DecidePd(Turn(1000), ws, {});
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().find("'w1'"), std::string::npos) << d.error();
}

// Random fleets: every option's cost is finite and bounded; the chosen option is no more
// expensive than any option computed on its own (CostAggregated / CostSplit), in particular
// any that uses an idle decode worker, unless that option misses the ITL SLO the chosen one
// meets; reversing the rows changes nothing.
TEST(PdDecisionTest, PropertiesOverRandomFleets) {
  std::mt19937_64 rng(19);
  auto uniform = [&](double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(rng() % 1000000) / 1e6;
  };
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 7);
    std::vector<WorkerSnapshot> ws;
    RequestProfile r = Turn(16 + rng() % 80000, 1 + rng() % 2000);
    for (int i = 0; i < n; ++i) {
      const Role role = static_cast<Role>(rng() % 3);
      WorkerSnapshot w = Engine(static_cast<WorkerId>(i), role, 1u << (rng() % 4),
                                std::exp(uniform(std::log(100.0), std::log(1e6))));
      w.prefill_attention_per_token = rng() % 2 ? 0 : uniform(0, 1e-4);
      if (rng() % 3 == 0) w = Busy(w, static_cast<std::uint32_t>(rng() % 300), rng() % 200000);
      w.pending_prefill_tokens = rng() % 4 == 0 ? rng() % 200000 : 0;
      w.kv_link_bytes_per_s = std::exp(uniform(std::log(1e3), std::log(1e12)));
      if (rng() % 5 == 0) w.kv_link_bytes_per_s.reset();
      w.healthy = rng() % 10 != 0;
      ws.push_back(w);
      if (rng() % 2) r.cache_views.push_back(View(w.id, static_cast<std::uint32_t>(rng() % (r.num_full_blocks + 1))));
    }
    if (rng() % 3 == 0) r.itl_slo_s = uniform(0.01, 0.2);
    SCOPED_TRACE("trial " + std::to_string(trial));
    const PdDecision d = Decide(r, ws);
    std::vector<WorkerSnapshot> reversed(ws.rbegin(), ws.rend());
    const PdDecision d2 = Decide(r, reversed);
    ASSERT_EQ(d.chosen.has_value(), d2.chosen.has_value());
    if (!d.chosen) continue;
    EXPECT_EQ(d.chosen->decode, d2.chosen->decode);
    EXPECT_EQ(d.chosen->prefill, d2.chosen->prefill);
    EXPECT_EQ(d.chosen->split, d2.chosen->split);
    const double best = d.chosen->cost_s();
    EXPECT_TRUE(std::isfinite(best));
    EXPECT_LE(best, kMaxPredictedSeconds);
    const auto slo = r.itl_slo_s;
    const bool chosen_meets = !slo || d.chosen->itl_s <= *slo;
    auto view_of = [&](WorkerId w) {
      for (const CacheView& v : r.cache_views) {
        if (v.worker == w) return v;
      }
      CacheView v;
      v.worker = w;
      return v;
    };
    auto check = [&](const PdOption& o, const WorkerSnapshot& decoder) {
      EXPECT_TRUE(std::isfinite(o.cost_s()) && o.cost_s() >= 0);
      EXPECT_TRUE(std::isfinite(o.transfer_s) && std::isfinite(o.itl_s));
      const bool o_meets = !slo || o.itl_s <= *slo;
      if (chosen_meets && !o_meets) return;  // dropped for a stated reason: the ITL SLO
      if (!chosen_meets && o_meets) {
        ADD_FAILURE() << "an option meeting the SLO was passed over: " << d.reason;
        return;
      }
      if (decoder.inflight_requests == 0) {
        EXPECT_LE(best, o.cost_s() * (1 + 1e-12)) << "idle decode worker " << decoder.id
                                                  << " passed over: " << d.reason;
      }
      EXPECT_LE(best, o.cost_s() * (1 + 1e-12)) << d.reason;
    };
    for (const WorkerSnapshot& w : ws) {
      if (CanAggregate(w, r.model)) {
        auto o = CostAggregated(r, view_of(w.id), w, {});
        ASSERT_TRUE(o.has_value()) << o.error();
        check(*o, w);
      }
      if (!CanDecodeLeg(w, r.model)) continue;
      for (const WorkerSnapshot& p : ws) {
        if (p.id == w.id || !CanPrefillLeg(p, r.model)) continue;
        auto o = CostSplit(r, view_of(p.id), p, view_of(w.id), w, {});
        ASSERT_TRUE(o.has_value()) << o.error();
        ASSERT_TRUE(o->has_value());
        check(**o, w);
      }
    }
  }
}

// The stall a local prefill causes (PredictChunkStall, latency_model.h): D runs 24 decodes
// (step 15 + 0.2·24 + 2e-9·960k ms = 21.72 ms) and prefills at 20k tokens/s in chunks of
// 2,072 − 24 = 2,048 tokens (0.1024 s each), so each chunk step costs each decode
// 0.1024 − 0.02172 s, and a 4,096-token local prefill 24 × 2 × that. The old term charged
// 0.1 × 24 × 0.2048 s whatever the decode step, 13 % of it here (and still does by default).
TEST(PdDecisionTest, TheStallIsEachChunkStepLessTheDecodeStepItReplaces) {
  const WorkerSnapshot d = Busy(Decode(1), 24, 24 * 2500);
  RequestProfile r = Turn(30000);
  r.cache_views = {View(1, (30000 - 4096) / 16)};
  const double step = 0.015 + 0.0002 * 24 + 2e-9 * 24 * 2500 * 16;
  auto stall = PredictChunkStall(r, r.cache_views[0], d, 2072);
  ASSERT_TRUE(stall.has_value()) << stall.error();
  EXPECT_NEAR(*stall, 24 * 2 * (2048.0 / 20000 - step), 1e-9);
  // With the chunk model as the stall term (stall 0, chunk_stall 1), the aggregated option
  // pays exactly that beside the shared own + others terms.
  PdOptions o;
  o.slowdown.chunk_tokens = 2072;
  o.slowdown.stall = 0;
  o.chunk_stall = 1;
  auto agg = CostAggregated(r, r.cache_views[0], d, o);
  ASSERT_TRUE(agg.has_value()) << agg.error();
  auto rest = PredictDecodeSlowdown(r, r.cache_views[0], d, o.slowdown);
  ASSERT_TRUE(rest.has_value());
  EXPECT_NEAR(agg->slowdown_s - rest->total_s(), *stall, 1e-9);
  // The weight scales it; 0 turns it off.
  o.chunk_stall = 0.5;
  EXPECT_NEAR(CostAggregated(r, r.cache_views[0], d, o)->slowdown_s - rest->total_s(),
              0.5 * *stall, 1e-9);
  // An idle D has no decode to stall.
  EXPECT_EQ(*PredictChunkStall(r, r.cache_views[0], Decode(1), 2072), 0);
}

// A local prefill whose chunk runs shorter than the decode step it joins hides under the
// decodes' memory traffic (engine/step_time.h's max(compute, memory)) and stalls nobody; the
// old term charged 0.1 × B × its prefill seconds all the same.
TEST(PdDecisionTest, APrefillShorterThanTheDecodeStepStallsNobody) {
  const WorkerSnapshot d = Busy(Decode(1), 24, 24 * 2500);
  RequestProfile r = Turn(30000);
  r.cache_views = {View(1, (30000 - 320) / 16)};  // 320 tokens: 16 ms < the 21.7 ms step
  auto stall = PredictChunkStall(r, r.cache_views[0], d, 2072);
  ASSERT_TRUE(stall.has_value()) << stall.error();
  EXPECT_EQ(*stall, 0);
  PdOptions o;
  o.slowdown.stall = 0;
  o.chunk_stall = 1;
  auto agg = CostAggregated(r, r.cache_views[0], d, o);
  auto rest = PredictDecodeSlowdown(r, r.cache_views[0], d, o.slowdown);
  ASSERT_TRUE(agg.has_value() && rest.has_value());
  EXPECT_NEAR(agg->slowdown_s, rest->total_s(), 1e-12);
}

}  // namespace
}  // namespace kvroute::sched
