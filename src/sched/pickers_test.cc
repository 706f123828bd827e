#include "sched/pickers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace kvroute::sched {
namespace {

WorkerId Picked(const Picker& picker, const std::vector<PickRow>& rows, PolicyState& state) {
  auto r = picker.Pick(rows, state);
  EXPECT_TRUE(r.has_value());
  return rows[r->row].worker;
}

TEST(ArgminPickerTest, PicksLowestCost) {
  PolicyState state(1);
  EXPECT_EQ(Picked(*NewArgminPicker(), {{1, 3.0}, {2, 1.5}, {3, 2.0}}, state), 2u);
}

TEST(ArgminPickerTest, TieBreakIsIndependentOfRowOrder) {
  const auto picker = NewArgminPicker();
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    PolicyState a(seed), b(seed);
    EXPECT_EQ(Picked(*picker, {{1, 1.0}, {2, 1.0}, {3, 1.0}, {4, 5.0}}, a),
              Picked(*picker, {{4, 5.0}, {3, 1.0}, {2, 1.0}, {1, 1.0}}, b));
  }
}

TEST(ArgminPickerTest, TieBreakReachesEveryTiedWorker) {
  const auto picker = NewArgminPicker();
  PolicyState state(7);
  std::map<WorkerId, int> seen;
  for (int i = 0; i < 300; ++i) ++seen[Picked(*picker, {{1, 0.0}, {2, 0.0}, {3, 9.0}}, state)];
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[2], 0);
  EXPECT_EQ(seen.count(3), 0u);
}

TEST(SoftmaxPickerTest, ZeroTemperatureIsArgmin) {
  PolicyState state(3);
  EXPECT_EQ(Picked(*NewSoftmaxPicker(0), {{1, 3.0}, {2, 1.0}}, state), 2u);
}

TEST(SoftmaxPickerTest, ProbabilitiesFollowMinMaxNormalisedCosts) {
  PolicyState state(3);
  // Costs 10 and 20 normalise to 0 and 1; T = 1: p = (1, e^-1) / (1 + e^-1).
  auto r = NewSoftmaxPicker(1.0)->Pick(std::vector<PickRow>{{1, 10.0}, {2, 20.0}}, state);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->probabilities.size(), 2u);
  EXPECT_NEAR(r->probabilities[0], 1 / (1 + std::exp(-1.0)), 1e-12);
  EXPECT_NEAR(r->probabilities[1], std::exp(-1.0) / (1 + std::exp(-1.0)), 1e-12);
}

TEST(SoftmaxPickerTest, SampledFrequenciesMatchProbabilitiesWithSeededRng) {
  const auto picker = NewSoftmaxPicker(1.0);
  PolicyState state(12345);
  const std::vector<PickRow> rows = {{2, 20.0}, {1, 10.0}};
  int ones = 0;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) ones += Picked(*picker, rows, state) == 1 ? 1 : 0;
  const double expected = 1 / (1 + std::exp(-1.0));  // 0.731
  EXPECT_NEAR(static_cast<double>(ones) / kDraws, expected, 0.03);
}

TEST(SoftmaxPickerTest, EqualCostsAreUniform) {
  PolicyState state(5);
  auto r = NewSoftmaxPicker(0.5)->Pick(std::vector<PickRow>{{1, 4.0}, {2, 4.0}, {3, 4.0}, {4, 4.0}},
                                       state);
  ASSERT_TRUE(r.has_value());
  for (double p : r->probabilities) EXPECT_DOUBLE_EQ(p, 0.25);
}

TEST(SoftmaxPickerTest, SameSeedSameSequence) {
  const auto picker = NewSoftmaxPicker(2.0);
  const std::vector<PickRow> rows = {{1, 1.0}, {2, 2.0}, {3, 3.0}};
  PolicyState a(99), b(99);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(Picked(*picker, rows, a), Picked(*picker, rows, b));
}

TEST(RandomPickerTest, CoversAllRowsRoughlyUniformly) {
  const auto picker = NewRandomPicker();
  PolicyState state(42);
  std::map<WorkerId, int> seen;
  constexpr int kDraws = 9000;
  for (int i = 0; i < kDraws; ++i) ++seen[Picked(*picker, {{5, 0.0}, {6, 100.0}, {7, 1.0}}, state)];
  for (WorkerId w : {5u, 6u, 7u}) EXPECT_NEAR(seen[w], kDraws / 3.0, kDraws * 0.05) << w;
}

TEST(RoundRobinPickerTest, CyclesThroughWorkerIdsInOrder) {
  const auto picker = NewRoundRobinPicker();
  PolicyState state(0);
  const std::vector<PickRow> rows = {{30, 0.0}, {10, 0.0}, {20, 0.0}};
  std::vector<WorkerId> picks;
  for (int i = 0; i < 4; ++i) picks.push_back(Picked(*picker, rows, state));
  EXPECT_EQ(picks, (std::vector<WorkerId>{10, 20, 30, 10}));
}

TEST(RoundRobinPickerTest, SkipsWorkersThatLeftTheSet) {
  const auto picker = NewRoundRobinPicker();
  PolicyState state(0);
  state.last_round_robin = 10;
  EXPECT_EQ(Picked(*picker, {{10, 0.0}, {30, 0.0}}, state), 30u);  // 20 is gone
  EXPECT_EQ(Picked(*picker, {{10, 0.0}, {30, 0.0}}, state), 10u);  // wraps
}

}  // namespace
}  // namespace kvroute::sched
