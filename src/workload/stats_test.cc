#include "workload/stats.h"

#include <gtest/gtest.h>

namespace kvroute::workload {
namespace {

// Hand-computed with the linear rule: rank = q·(n−1).
TEST(StatsTest, PercentilesInterpolateBetweenClosestRanks) {
  std::vector<double> x = {4, 1, 3, 2};  // sorted 1 2 3 4
  EXPECT_DOUBLE_EQ(*Percentile(x, 0.5), 2.5);    // rank 1.5
  EXPECT_DOUBLE_EQ(*Percentile(x, 0.9), 3.7);    // rank 2.7
  EXPECT_DOUBLE_EQ(*Percentile(x, 0.99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(*Percentile(x, 0.0), 1);
  EXPECT_DOUBLE_EQ(*Percentile(x, 1.0), 4);
}

TEST(StatsTest, EmptySampleHasNoPercentile) {
  EXPECT_FALSE(Percentile({}, 0.5).has_value());
  EXPECT_EQ(Summarize({}).count, 0u);
}

TEST(StatsTest, SummaryOfASample) {
  std::vector<double> x = {10, 20, 30, 40, 50};
  auto s = Summarize(x);
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.mean, 30);
  EXPECT_DOUBLE_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.max, 50);
  EXPECT_DOUBLE_EQ(s.p50, 30);
  EXPECT_DOUBLE_EQ(s.p90, 46);  // rank 3.6 → 40 + 0.6·10
  EXPECT_DOUBLE_EQ(s.p99, 49.6);  // rank 3.96
}

}  // namespace
}  // namespace kvroute::workload
