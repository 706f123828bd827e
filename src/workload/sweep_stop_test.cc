#include "workload/sweep_stop.h"

#include <gtest/gtest.h>

namespace kvroute::workload {
namespace {

Summary MeanOf(double mean_s, std::size_t count = 100) {
  Summary s;
  s.count = count;
  s.mean = mean_s;
  return s;
}

TEST(SweepStopAfter, StopsWhenTheMeanItlExceedsTheThreshold) {
  auto stop = SweepStopAfter("c=64", MeanOf(0.0431), kInferaStopMeanItlS);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->after_level, "c=64");
  EXPECT_DOUBLE_EQ(stop->mean_itl_s, 0.0431);
  EXPECT_TRUE(stop->skipped.empty());
}

TEST(SweepStopAfter, AMeanAtTheThresholdDoesNotStop) {
  EXPECT_FALSE(SweepStopAfter("c=32", MeanOf(0.040), 0.040).has_value());
  EXPECT_FALSE(SweepStopAfter("c=32", MeanOf(0.0399), 0.040).has_value());
}

TEST(SweepStopAfter, AZeroThresholdTurnsTheRuleOff) {
  EXPECT_FALSE(SweepStopAfter("c=8", MeanOf(5.0), 0).has_value());
  EXPECT_FALSE(SweepStopAfter("c=8", MeanOf(5.0), -1).has_value());
}

TEST(SweepStopAfter, ALevelWithoutItlSamplesDoesNotStop) {
  // Every request failed (or produced one token): no evidence the target was missed.
  EXPECT_FALSE(SweepStopAfter("c=8", MeanOf(0.5, 0), 0.040).has_value());
}

TEST(SweepStopNote, NamesTheLevelTheMeanAndTheLevelsNotRun) {
  SweepStop stop{.after_level = "c=32", .mean_itl_s = 0.0452, .skipped = {64, 128}};
  EXPECT_EQ(SweepStopNote(stop, 0.040),
            "sweep stopped after c=32: mean ITL 45.2 ms > 40.0 ms (Infera's rule); not run: "
            "c=64, c=128");
  stop.skipped.clear();
  EXPECT_EQ(SweepStopNote(stop, 0.040),
            "sweep stopped after c=32: mean ITL 45.2 ms > 40.0 ms (Infera's rule)");
}

}  // namespace
}  // namespace kvroute::workload
