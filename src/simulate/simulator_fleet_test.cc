// Failure injection and fleet changes.
#include <gtest/gtest.h>

#include "engine/step_time.h"
#include "simulate/sim_test_util.h"
#include "simulate/simulator.h"

namespace kvroute::simulate {
namespace {

using testing::Options;
using testing::SmallSharedPrefix;

FleetChange Change(FleetChange::Kind kind, double at_s, WorkerId worker, int count = 0) {
  FleetChange c;
  c.kind = kind;
  c.at = FromSeconds(at_s);
  c.worker = worker;
  c.count = count;
  c.spec = testing::SmallWorker();
  return c;
}

TEST(SimulatorFleetTest, DeadWorkerGetsNoMoreRequests) {
  // 40 arrivals at 20/s over ~2 s; the failure at 0.5 s leaves most of them after it
  // whatever the Poisson sample.
  SimOptions o = Options(3, "round_robin");
  o.fleet.changes.push_back(Change(FleetChange::Kind::kFail, 0.5, 1));
  Simulator sim(std::move(o), NewSharedPrefixWorkload(SmallSharedPrefix(5, 8, 20)));
  auto r = sim.Run();
  ASSERT_TRUE(r.has_value()) << r.error();
  std::size_t after = 0, before_on_1 = 0;
  for (const DecisionRecord& d : r->decisions) {
    if (d.at_s > 0.5) {
      ++after;
      EXPECT_NE(d.worker, 1u) << "request " << d.request;
    } else if (d.worker == 1) {
      ++before_on_1;
    }
  }
  EXPECT_GT(after, 10u);
  EXPECT_GT(before_on_1, 0u);
  EXPECT_FALSE(r->workers[1].alive);
  EXPECT_EQ(sim.engine(1), nullptr);
}

TEST(SimulatorFleetTest, RequestsInFlightOnAFailedWorkerFail) {
  SimOptions o = Options(1, "round_robin");
  o.fleet.workers.push_back(testing::SmallWorker());
  o.fleet.changes.push_back(Change(FleetChange::Kind::kFail, 0.3, 0));
  auto shape = SmallSharedPrefix(2, 10, 50);
  shape.shape.output_tokens = 400;  // long enough to be mid-stream at the failure
  Simulator sim(std::move(o), NewSharedPrefixWorkload(shape));
  auto r = sim.Run();
  ASSERT_TRUE(r.has_value()) << r.error();
  std::size_t failed = 0;
  for (std::size_t i = 0; i < r->decisions.size(); ++i) {
    const auto& q = r->level.requests[i].result;
    if (!q.ok) {
      ++failed;
      EXPECT_EQ(r->decisions[i].worker, 0u);
      EXPECT_TRUE(q.error_kind == "stream" || q.error_kind == "connect") << q.error_kind;
    }
  }
  EXPECT_GT(failed, 0u);
}

TEST(SimulatorFleetTest, RestartedWorkerStartsWithAnEmptyCache) {
  // One worker, one group: every request after the first hits the shared system prompt,
  // except the first one after the restart.
  SimOptions o = Options(1, "predicted_latency");
  o.fleet.changes.push_back(Change(FleetChange::Kind::kRestart, 5.0, 0));
  Simulator sim(std::move(o), NewSharedPrefixWorkload(SmallSharedPrefix(1, 20, 2)));
  auto r = sim.Run();
  ASSERT_TRUE(r.has_value()) << r.error();
  bool first_after = true;
  std::size_t before = 0, after = 0;
  for (const auto& rec : r->level.requests) {
    const auto& q = rec.result;
    if (!q.ok) continue;
    if (q.start_s < 5.0) {
      if (before++ > 0) {
        EXPECT_GT(q.cached_tokens, 0u);
      }
    } else if (first_after) {
      EXPECT_EQ(q.cached_tokens, 0u) << "first request after the restart";
      first_after = false;
      ++after;
    } else {
      EXPECT_GT(q.cached_tokens, 0u);
      ++after;
    }
  }
  EXPECT_GT(before, 2u);
  EXPECT_GT(after, 2u);
  EXPECT_EQ(r->workers[0].restarts, 1u);
}

TEST(SimulatorFleetTest, AddedWorkersTakeRequests) {
  SimOptions o = Options(2, "round_robin");
  o.fleet.changes.push_back(Change(FleetChange::Kind::kAdd, 1.0, 0, 2));
  Simulator sim(std::move(o), NewSharedPrefixWorkload(SmallSharedPrefix(4, 10, 20)));
  auto r = sim.Run();
  ASSERT_TRUE(r.has_value()) << r.error();
  ASSERT_EQ(r->workers.size(), 4u);
  EXPECT_GT(r->workers[2].routed, 0u);
  EXPECT_GT(r->workers[3].routed, 0u);
  for (const DecisionRecord& d : r->decisions) {
    if (d.at_s < 1.0) {
      EXPECT_LT(d.worker, 2u);
    }
  }
}

TEST(SimulatorFleetTest, HeterogeneousWorkersRunTheirOwnProfiles) {
  SimOptions o = Options(1, "round_robin");
  auto llama = engine::LoadProfile("llama-3.1-8b-h100");
  ASSERT_TRUE(llama.has_value());
  o.fleet.workers.push_back(testing::SmallWorker());
  o.fleet.workers[1].profile = *llama;
  const engine::Profile qwen = o.fleet.workers[0].profile;
  auto trace = std::make_shared<workload::Trace>();
  trace->hash_block_tokens = 512;
  // Two cold requests far apart: one per worker, each alone on its engine.
  trace->requests = {{0.0, 2048, 3, {1, 2, 3, 4}}, {30.0, 2048, 3, {5, 6, 7, 8}}};
  Simulator sim(std::move(o), NewTraceWorkload(trace, {}));
  auto r = sim.Run();
  ASSERT_TRUE(r.has_value()) << r.error();
  ASSERT_EQ(r->decisions.size(), 2u);
  ASSERT_EQ(r->decisions[0].worker, 0u);
  ASSERT_EQ(r->decisions[1].worker, 1u);
  EXPECT_DOUBLE_EQ(r->level.requests[0].result.ttft_s,
                   ToSeconds(engine::StepTimeModel(qwen).PrefillTime(2048)));
  EXPECT_DOUBLE_EQ(r->level.requests[1].result.ttft_s,
                   ToSeconds(engine::StepTimeModel(*llama).PrefillTime(2048)));
  EXPECT_NE(r->level.requests[0].result.ttft_s, r->level.requests[1].result.ttft_s);
  EXPECT_EQ(r->workers[1].profile, "llama-3.1-8b-h100");
}

}  // namespace
}  // namespace kvroute::simulate
