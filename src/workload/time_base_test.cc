#include "workload/time_base.h"

#include <gtest/gtest.h>

#include <vector>

#include "workload/goodput.h"
#include "workload/report.h"

namespace kvroute::workload {
namespace {

// A closed-loop level whose requests each stream `tokens` output tokens `gap_s` apart (wall).
LevelResult WallLevel(int concurrency, double gap_s, int tokens, double duration_s) {
  LevelResult l;
  l.name = "c=" + std::to_string(concurrency);
  l.concurrency = concurrency;
  l.duration_s = duration_s;
  for (int i = 0; i < concurrency; ++i) {
    RequestResult r;
    r.ok = true;
    r.start_s = 0.5 * i;
    r.ttft_s = 0.1;
    r.itl_s.assign(tokens - 1, gap_s);
    r.e2e_s = r.ttft_s + gap_s * (tokens - 1);
    r.prompt_tokens = 1000;
    r.output_tokens = static_cast<std::uint32_t>(tokens);
    l.requests.push_back(RequestRecord{r, i, 0});
  }
  return l;
}

TEST(TimeBaseTest, MultipliesEveryMeasuredDurationBySpeedup) {
  LevelResult l = WallLevel(2, 0.002, 5, 3.0);
  ScaleToModelTime(l, 20);
  EXPECT_DOUBLE_EQ(l.duration_s, 60.0);
  const RequestResult& r = l.requests[1].result;
  EXPECT_DOUBLE_EQ(r.start_s, 10.0);
  EXPECT_DOUBLE_EQ(r.ttft_s, 2.0);
  EXPECT_DOUBLE_EQ(r.e2e_s, 20 * (0.1 + 0.002 * 4));
  ASSERT_EQ(r.itl_s.size(), 4u);
  for (double gap : r.itl_s) EXPECT_DOUBLE_EQ(gap, 0.04);
}

TEST(TimeBaseTest, SpeedupOneLeavesTheLevelUnchanged) {
  LevelResult l = WallLevel(1, 0.01, 3, 2.0);
  ScaleToModelTime(l, 1);
  EXPECT_DOUBLE_EQ(l.duration_s, 2.0);
  EXPECT_DOUBLE_EQ(l.requests[0].result.itl_s[0], 0.01);
}

TEST(TimeBaseTest, ThroughputIsPerModelSecond) {
  LevelResult l = WallLevel(4, 0.002, 101, 10.0);
  const double wall_rate = SummarizeLevel(l, std::nullopt).output_tokens_per_s;
  ScaleToModelTime(l, 20);
  EXPECT_DOUBLE_EQ(SummarizeLevel(l, std::nullopt).output_tokens_per_s, wall_rate / 20);
}

// The bug this fixes: a 2 ms wall gap at speedup 20 is a 40 ms model gap (25 tok/s per user),
// which misses a 30 tok/s target although the wall gap looked like 500 tok/s.
TEST(TimeBaseTest, PerUserTargetIsJudgedInModelTime) {
  RunReport run;
  run.itl_targets_tps = {30, 20};
  run.levels.push_back(WallLevel(4, 0.002, 11, 5.0));
  ScaleToModelTime(run.levels.back(), 20);
  const auto goodput = InferaGoodputs(run);
  ASSERT_EQ(goodput.size(), 2u);
  EXPECT_FALSE(goodput[0].tokens_per_s_per_gpu.has_value());
  ASSERT_TRUE(goodput[1].tokens_per_s_per_gpu.has_value());
  EXPECT_EQ(goodput[1].at_concurrency, 4);
}

// Model-time arrivals become wall-time sends (a send at model second 0.1 against sims at
// speedup 5 goes out at wall second 0.02); after the level, ScaleToModelTime turns the recorded
// starts back into the model-time schedule, so the reported offered rate is the requested one.
TEST(TimeBaseTest, OpenLoopArrivalsAreSentInWallTimeAndReportedInModelTime) {
  std::vector<double> model = {0.0, 0.1, 0.25, 1.0};
  auto wall = ToWallTime(model, 5);
  ASSERT_EQ(wall.size(), model.size());
  EXPECT_DOUBLE_EQ(wall[1], 0.02);
  EXPECT_DOUBLE_EQ(wall[3], 0.2);
  LevelResult level;
  for (std::size_t i = 0; i < wall.size(); ++i) {
    RequestResult r;
    r.start_s = wall[i];
    level.requests.push_back(RequestRecord{r, -1, static_cast<int>(i)});
  }
  ScaleToModelTime(level, 5);
  for (std::size_t i = 0; i < model.size(); ++i) {
    EXPECT_NEAR(level.requests[i].result.start_s, model[i], 1e-12);
  }
}

TEST(TimeBaseTest, NoteNamesTheConvention) {
  EXPECT_NE(TimeBaseNote(20).find("model time = wall x 20"), std::string::npos);
  EXPECT_NE(TimeBaseNote(1).find("wall clock"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::workload
