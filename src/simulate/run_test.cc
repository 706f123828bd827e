// RunSimulation: the command's options → levels → the bench-format report, as a library call.
#include "simulate/run.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kvroute::simulate
