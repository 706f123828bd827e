#include "simulate/simulator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <unordered_set>

#include "engine/step_time.h"
#include "fleet/router_state.h"
#include "kv/index/index.h"
#include "simulate/sim_report.h"
#include "simulate/sim_test_util.h"

namespace kvroute::simulate {
namespace {

using testing::Options;
using testing::SmallAgentic;
using testing::SmallSharedPrefix;

// Every field of every request and decision, doubles as exact hex floats.
std::string Fingerprint(const SimResult& r) {
  std::string out;
  char buf[160];
  for (const auto& rec : r.level.requests) {
    const auto& q = rec.result;
    std::snprintf(buf, sizeof buf, "%d %s %a %a %a %u %u %u|", q.ok, q.error_kind.c_str(),
                  q.start_s, q.ttft_s, q.e2e_s, q.prompt_tokens, q.output_tokens, q.cached_tokens);
    out += buf;
    for (double g : q.itl_s) {
      std::snprintf(buf, sizeof buf, "%a,", g);
      out += buf;
    }
    out += '\n';
  }
  workload::RunReport report;
  std::vector<SimLevelExtras> levels = {{"x", r.decisions, r.workers, 0, 0, 0, 0, 0, ""}};
  report.levels.push_back(r.level);
  return out + DecisionsCsv(report, levels) + WorkersCsv(levels);
}

SimResult RunOrDie(SimOptions o, std::unique_ptr<Workload> w) {
  Simulator sim(std::move(o), std::move(w));
  auto r = sim.Run();
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error());
  return r ? std::move(*r) : SimResult{};
}

TEST(SimulatorTest, SameSeedGivesByteIdenticalResults) {
  auto run = [](std::uint64_t seed) {
    SimOptions o = Options(4, "predicted_latency");
    o.seed = seed;
    o.event_delay = std::chrono::milliseconds(20);
    return Fingerprint(RunOrDie(std::move(o), NewAgenticWorkload(SmallAgentic(6, 3))));
  };
  const std::string a = run(7);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, run(7));
}

TEST(SimulatorTest, DifferentSeedsChangeSampledDecisions) {
  // The random picker draws from the seeded PolicyState only.
  auto run = [](std::uint64_t seed) {
    SimOptions o = Options(8, "random");
    o.seed = seed;
    return Fingerprint(RunOrDie(std::move(o), NewSharedPrefixWorkload(SmallSharedPrefix(4, 4, 5))));
  };
  EXPECT_NE(run(1), run(2));
}

TEST(SimulatorTest, SingleWorkerTtftEqualsTheEnginePrefillPrediction) {
  SimOptions o = Options(1, "round_robin");
  const engine::Profile profile = o.fleet.workers[0].profile;
  auto trace = std::make_shared<workload::Trace>();
  trace->hash_block_tokens = 512;
  trace->requests = {{0.0, 3000, 5, {1, 2, 3, 4, 5}}};
  SimResult r = RunOrDie(std::move(o), NewTraceWorkload(trace, {}));
  ASSERT_EQ(r.level.requests.size(), 1u);
  const auto& q = r.level.requests[0].result;
  ASSERT_TRUE(q.ok);
  const engine::StepTimeModel model(profile);
  EXPECT_DOUBLE_EQ(q.ttft_s, ToSeconds(model.PrefillTime(3000)));
  EXPECT_EQ(q.output_tokens, 5u);
  EXPECT_EQ(q.itl_s.size(), 4u);
  EXPECT_EQ(q.cached_tokens, 0u);
}

// One 3,000-token request alone on one worker, sent at 0, with a router delay of
// 2 ms + 1 ms per 1,000 prompt tokens (docs/simulation.md "Fidelity": the live proxy's time).
SimResult LoneRequestWithRouterDelay() {
  SimOptions o = Options(1, "round_robin");
  o.router_delay = std::chrono::milliseconds(2);
  o.router_delay_per_1k_tokens = std::chrono::milliseconds(1);
  auto trace = std::make_shared<workload::Trace>();
  trace->hash_block_tokens = 512;
  trace->requests = {{0.0, 3000, 5, {1, 2, 3, 4, 5}}};
  return RunOrDie(std::move(o), NewTraceWorkload(trace, {}));
}

TEST(SimulatorTest, RouterDelayIsPartOfTheTtftCountedFromTheSend) {
  const engine::Profile profile = Options(1, "round_robin").fleet.workers[0].profile;
  SimResult r = LoneRequestWithRouterDelay();
  ASSERT_EQ(r.level.requests.size(), 1u);
  const auto& q = r.level.requests[0].result;
  ASSERT_TRUE(q.ok);
  EXPECT_DOUBLE_EQ(q.start_s, 0.0);
  const engine::StepTimeModel model(profile);
  EXPECT_NEAR(q.ttft_s, 0.005 + ToSeconds(model.PrefillTime(3000)), 1e-9);
}

TEST(SimulatorTest, RouterDelayDefersTheRoutingDecision) {
  SimResult r = LoneRequestWithRouterDelay();
  ASSERT_EQ(r.decisions.size(), 1u);
  EXPECT_NEAR(r.decisions[0].at_s, 0.005, 1e-9);
}

TEST(SimulatorTest, ClosedLoopTurnsStayOnTheirWorkerUnderPrefixAwarePolicy) {
  SimResult r = RunOrDie(Options(4, "predicted_latency"), NewAgenticWorkload(SmallAgentic(4, 5)));
  ASSERT_EQ(r.level.requests.size(), 20u);
  for (const auto& [session, ws] : testing::WorkersBySession(r)) {
    EXPECT_EQ(ws.size(), 1u) << "session " << session;
  }
  // Later turns reuse the history: cached tokens grow past the first turn's prompt.
  for (const auto& rec : r.level.requests) {
    if (rec.turn > 0) {
      EXPECT_GT(rec.result.cached_tokens, 768u) << "turn " << rec.turn;
    }
  }
}

TEST(SimulatorTest, ClosedLoopTurnsSpreadUnderRoundRobin) {
  // 4 sessions over 3 workers: the cursor shifts by one worker per round of turns.
  SimResult r = RunOrDie(Options(3, "round_robin"), NewAgenticWorkload(SmallAgentic(4, 5)));
  std::size_t multi = 0;
  for (const auto& [session, ws] : testing::WorkersBySession(r)) multi += ws.size() > 1 ? 1 : 0;
  EXPECT_EQ(multi, 4u);
}

// Depth of the consecutive prefix of `keys` present in `cached`.
std::uint32_t Depth(const std::vector<kv::BlockKey>& keys,
                    const std::unordered_set<kv::EngineHash>& cached) {
  std::uint32_t d = 0;
  while (d < keys.size() && cached.contains(keys[d])) ++d;
  return d;
}

// Runs a shared-prefix workload on 2 workers and counts, after every step, the prompts whose
// GPU depth in the index differs from the engine's cache.
std::size_t IndexMismatches(Nanos delay) {
  const auto shape = SmallSharedPrefix(6, 4, 20);
  std::vector<std::vector<kv::BlockKey>> prompts;
  kv::BlockKeyer keyer(16);
  {
    auto w = NewSharedPrefixWorkload(shape);
    while (auto a = w->Next()) prompts.push_back(keyer.Keys(a->request.prompt));
  }
  SimOptions o = Options(2, "predicted_latency");
  o.event_delay = delay;
  for (auto& w : o.fleet.workers) w.config.num_gpu_blocks_override = 200;  // forces evictions
  std::size_t checks = 0, mismatches = 0;
  Simulator* sim_ptr = nullptr;
  o.on_step_end = [&](WorkerId w, Nanos) {
    const auto hashes = sim_ptr->engine(w)->CachedBlockHashes(kv::Tier::kGpu);
    const std::unordered_set<kv::EngineHash> cached(hashes.begin(), hashes.end());
    for (const auto& keys : prompts) {
      std::uint32_t indexed = 0;
      for (const kv::WorkerMatch& m : sim_ptr->index().Lookup(keys)) {
        if (m.worker == w) indexed = m.depth[static_cast<int>(kv::Tier::kGpu)];
      }
      ++checks;
      mismatches += indexed != Depth(keys, cached) ? 1 : 0;
    }
  };
  Simulator sim(std::move(o), NewSharedPrefixWorkload(shape));
  sim_ptr = &sim;
  auto r = sim.Run();
  EXPECT_TRUE(r.has_value());
  EXPECT_GT(checks, 100u);
  return mismatches;
}

TEST(SimulatorTest, ZeroEventDelayKeepsTheIndexEqualToTheEngineCachesAfterEveryStep) {
  EXPECT_EQ(IndexMismatches(Nanos(0)), 0u);
}

// Infera's procedure (vLLM's multi-turn tool with --warmup-step and its early stop): the
// first turns run first and count nowhere; the level's window opens at the first measured send
// and nothing is sent once the first session is over.
TEST(SimulatorTest, WarmupStepAndEarlyStopShapeTheMeasuredWindow) {
  AgenticSimOptions a = SmallAgentic(4, 10);
  a.turn_jitter = std::chrono::seconds(1);  // sessions drift apart and end at different times
  a.procedure = {.warmup_step = true, .early_stop = true};
  SimResult r = RunOrDie(Options(2, "predicted_latency"), NewAgenticWorkload(a));
  double warmup_end = 0, first_measured = 1e300, measured_end = 0, first_session_end = 1e300;
  std::size_t warmups = 0, measured = 0;
  for (const workload::RequestRecord& rec : r.level.requests) {
    ASSERT_TRUE(rec.result.ok);
    const double end = rec.result.start_s + rec.result.e2e_s;
    if (rec.warmup) {
      ++warmups;
      EXPECT_EQ(rec.turn, 0);
      warmup_end = std::max(warmup_end, end);
      continue;
    }
    ++measured;
    EXPECT_GE(rec.turn, 1);
    first_measured = std::min(first_measured, rec.result.start_s);
    measured_end = std::max(measured_end, end);
    if (rec.turn == 9) first_session_end = std::min(first_session_end, end);
  }
  EXPECT_EQ(warmups, 4u);
  ASSERT_GT(measured, 0u);
  EXPECT_LT(measured, 4u * 9);  // the early stop left turns unsent
  EXPECT_GE(first_measured, warmup_end);
  EXPECT_NEAR(r.level.duration_s, measured_end - first_measured, 1e-9);
  for (const workload::RequestRecord& rec : r.level.requests) {
    if (!rec.warmup) {
      EXPECT_LE(rec.result.start_s, first_session_end);
    }
  }
  EXPECT_EQ(workload::SummarizeLevel(r.level, std::nullopt).sent, measured);
}

TEST(SimulatorTest, EventDelayMakesTheIndexLagTheEngines) {
  EXPECT_GT(IndexMismatches(std::chrono::milliseconds(200)), 0u);
}

// The lean path (only the chosen worker's decision trace, reused engine step results) gives
// byte-identical results to the reference path (every candidate's trace, a fresh result per
// step) for every preset, with delayed KV events, evictions, a failure, a restart and added
// workers. Pure performance changes must keep this test passing.
TEST(SimulatorTest, LeanPathGivesTheSameResultsAsTheFullTracePath) {
  auto run = [](std::string_view preset, bool full_trace, bool agentic) {
    SimOptions o = Options(5, preset);
    o.full_trace = full_trace;
    o.event_delay = std::chrono::milliseconds(20);
    for (auto& w : o.fleet.workers) w.config.num_gpu_blocks_override = 300;  // evictions
    auto change = [&](FleetChange::Kind kind, double at_s, WorkerId worker, int count) {
      FleetChange c;
      c.kind = kind;
      c.at = FromSeconds(at_s);
      c.worker = worker;
      c.count = count;
      c.spec = o.fleet.workers[0];
      o.fleet.changes.push_back(c);
    };
    change(FleetChange::Kind::kFail, 0.8, 1, 0);
    change(FleetChange::Kind::kRestart, 1.5, 3, 0);
    change(FleetChange::Kind::kAdd, 1.0, 0, 2);
    return Fingerprint(
        RunOrDie(std::move(o), agentic ? NewAgenticWorkload(SmallAgentic(8, 4))
                                       : NewSharedPrefixWorkload(SmallSharedPrefix(5, 8, 30))));
  };
  for (const char* preset : {"predicted_latency", "llmd_sticky", "dynamo_cost", "approx_prefix",
                             "least_load", "round_robin", "random"}) {
    for (bool agentic : {false, true}) {
      const std::string full = run(preset, true, agentic);
      EXPECT_GT(full.size(), 1000u) << preset;
      EXPECT_EQ(run(preset, false, agentic), full) << preset << (agentic ? " agentic" : "");
    }
  }
}

// Issue 15: requests longer than the context fail at once; they must not feed the rate
// learner or the calibration as if served, and must leave no load behind.
TEST(SimulatorTest, FastFailuresFeedNeitherTheLearnerNorTheLoad) {
  auto trace = std::make_shared<workload::Trace>();
  trace->hash_block_tokens = 512;
  std::uint64_t next_id = 0;
  for (int i = 0; i < 40; ++i) {
    workload::TraceRequest r;
    r.arrival_s = 0.5 * i;
    r.input_tokens = i % 4 == 0 ? 50000 : 2048;  // 50,000 > the profile's 40,960
    r.output_tokens = 8;
    for (std::uint32_t b = 0; b < (r.input_tokens + 511) / 512; ++b) r.hash_ids.push_back(next_id++);
    trace->requests.push_back(r);
  }
  SimOptions o = testing::Options(2, "predicted_latency");
  Simulator sim(o, NewTraceWorkload(trace, TraceSimOptions{}));
  auto r = sim.Run();
  ASSERT_TRUE(r.has_value()) << r.error();
  int ok = 0, failed = 0;
  for (const auto& req : r->level.requests) {
    if (req.result.ok) {
      ++ok;
    } else {
      ++failed;
      EXPECT_EQ(req.result.error_kind, "http_4xx");
    }
  }
  EXPECT_EQ(failed, 10);
  EXPECT_EQ(ok, 30);
  std::uint64_t prefill_samples = 0, calibrated = 0;
  for (WorkerId w = 0; w < 2; ++w) {
    prefill_samples += sim.router_state().rates().Estimate(w)->prefill_samples;
    calibrated += sim.router_state().load().Calibration(w).samples;
    EXPECT_EQ(sim.router_state().load().Load(w), fleet::WorkerLoad{});
  }
  EXPECT_EQ(prefill_samples, 30u);  // one per served first token, none per failure
  EXPECT_EQ(calibrated, 30u);
  EXPECT_EQ(sim.router_state().load().inflight(), 0u);
}

}  // namespace
}  // namespace kvroute::simulate
