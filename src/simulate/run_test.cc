// RunSimulation: the command's options → levels → the bench-format report, as a library call.
#include "simulate/run.h"

#include <gtest/gtest.h>

#include <limits>

namespace kvroute::simulate {
namespace {

RunOptions Small() {
  RunOptions o;
  o.workers = 2;
  o.concurrency = {1, 2};
  o.agentic.sessions = 2;
  o.agentic.turns = 2;
  o.progress = false;
  return o;
}

TEST(RunSimulationTest, OneLevelPerConcurrencyWithItsRunLines) {
  std::vector<std::string> lines;
  auto out = RunSimulation(Small(), [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(out.has_value()) << out.error();
  ASSERT_EQ(out->report.levels.size(), 2u);
  EXPECT_EQ(out->report.levels[0].name, "c=1");
  EXPECT_EQ(out->report.levels[1].concurrency, 2);
  EXPECT_EQ(out->extras.size(), 2u);
  EXPECT_EQ(out->report.target, "simulate");
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.front().find("level c=1"), std::string::npos);
  for (const auto& level : out->report.levels) {
    EXPECT_EQ(level.requests.size(), 4u);  // 2 sessions x 2 turns
  }
}

TEST(RunSimulationTest, AnUnusableOptionIsAnErrorNamingItsFlag) {
  RunOptions o = Small();
  o.scrape_interval = "soon";
  auto out = RunSimulation(o, [](const std::string&) {});
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.error().find("--scrape-interval"), std::string::npos);
  o = Small();
  o.workload = "trace";
  out = RunSimulation(o, [](const std::string&) {});
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.error().find("--trace"), std::string::npos);
}

// The lower tiers' speeds are flags here as on `kvroute sim`: a slower store makes the same
// routing (round robin, so the choices cannot change with the speed) wait longer for the same
// store hits, and the report says which speeds it ran with.
TEST(RunSimulationTest, TheStoreBandwidthFlagSlowsItsLoads) {
  RunOptions o = Small();
  o.policy = "round_robin";
  o.concurrency = {4};
  o.agentic.sessions = 8;
  o.agentic.turns = 3;
  o.agentic.common_prefix_tokens = 256;
  o.agentic.session_prefix_tokens = 512;
  o.agentic.turn_input_tokens = 128;
  o.agentic.output_tokens = 16;
  o.num_gpu_blocks = 128;  // 2,048 tokens: four sessions' contexts leave the GPU between turns
  o.kv_store_gb = 10;
  auto run = [](const RunOptions& opts) {
    auto out = RunSimulation(opts, [](const std::string&) {});
    EXPECT_TRUE(out.has_value()) << (out ? "" : out.error());
    return out;
  };
  auto mean_ttft = [](const workload::RunReport& r) {
    double sum = 0;
    for (const auto& q : r.levels[0].requests) sum += q.result.ttft_s;
    return sum / static_cast<double>(r.levels[0].requests.size());
  };
  auto fast = run(o);
  o.kv_store_bandwidth = 1e8;  // 125x slower than the default 100 Gb/s NIC
  o.kv_store_latency_s = 0.05;
  auto slow = run(o);
  ASSERT_TRUE(fast && slow);
  ASSERT_TRUE(fast->report.levels[0].tier_hit_rate.has_value());
  ASSERT_TRUE(slow->report.levels[0].tier_hit_rate.has_value());
  EXPECT_GT((*fast->report.levels[0].tier_hit_rate)[3], 0) << "the store serves some prefixes";
  EXPECT_GT(mean_ttft(slow->report), mean_ttft(fast->report));
  auto config_value = [](const workload::RunReport& r, const std::string& key) {
    for (const auto& [k, v] : r.config) {
      if (k == key) return std::get<double>(v);
    }
    return -1.0;
  };
  EXPECT_EQ(config_value(slow->report, "kv_store_bytes_per_s"), 1e8);
  EXPECT_EQ(config_value(slow->report, "kv_store_latency_s"), 0.05);
  EXPECT_EQ(config_value(fast->report, "kv_store_bytes_per_s"), -1.0) << "absent: the default";

  o.kv_store_bandwidth = -1;
  auto bad = RunSimulation(o, [](const std::string&) {});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().find("--kv-store-bandwidth"), std::string::npos);
  EXPECT_EQ(bad.error().find("--disk-read-bandwidth"), std::string::npos) << bad.error();
  o.kv_store_bandwidth = 0;
  o.disk_read_bandwidth = std::numeric_limits<double>::quiet_NaN();
  bad = RunSimulation(o, [](const std::string&) {});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().find("--disk-read-bandwidth"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::simulate
