// Scorers whose arithmetic is not already pinned by presets_test.cc.
#include "sched/scorers.h"

#include <gtest/gtest.h>

#include <vector>

#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;
using testing::Worker;

std::vector<double> Costs(const Scorer& s, const RequestProfile& r,
                          const std::vector<Candidate>& cs) {
  auto v = s.Score(r, cs);
  EXPECT_TRUE(v.has_value());
  return v ? *v : std::vector<double>{};
}

TEST(EngineQueueScorerTest, NormalisesScrapedQueuesAndPenalisesUnknown) {
  WorkerSnapshot a = Worker(1), b = Worker(2), c = Worker(3), d = Worker(4);
  a.scraped = ScrapedMetrics{.num_waiting = 2};
  b.scraped = ScrapedMetrics{.num_waiting = 6};
  c.scraped = ScrapedMetrics{.num_waiting = 4};
  // d: never scraped
  EXPECT_EQ(Costs(*NewEngineQueueScorer(), Request(64), {{&a, {}}, {&b, {}}, {&c, {}}, {&d, {}}}),
            (std::vector<double>{0.0, 1.0, 0.5, 1.0}));
}

TEST(EngineQueueScorerTest, EqualQueuesCostNothing) {
  WorkerSnapshot a = Worker(1), b = Worker(2);
  a.scraped = b.scraped = ScrapedMetrics{.num_waiting = 3};
  EXPECT_EQ(Costs(*NewEngineQueueScorer(), Request(64), {{&a, {}}, {&b, {}}}),
            (std::vector<double>{0.0, 0.0}));
}

TEST(KvUsageScorerTest, UnknownCapacityCountsAsFull) {
  WorkerSnapshot a = Worker(1), b = Worker(2);
  a.active_kv_blocks = 250;  // of 1000
  b.kv_capacity_blocks = 0;
  EXPECT_EQ(Costs(*NewKvUsageScorer(), Request(64), {{&a, {}}, {&b, {}}}),
            (std::vector<double>{0.25, 1.0}));
}

TEST(TokenLoadScorerTest, CountsPendingPlusUncachedShareOfPrompt) {
  WorkerSnapshot a = Worker(1);
  a.pending_prefill_tokens = 1000;
  // 320 tokens, 5 of 20 blocks held: 1000 + 320 * 0.75 = 1240 tokens of a 2000 limit
  EXPECT_DOUBLE_EQ(
      Costs(*NewTokenLoadScorer({.token_limit = 2000}), Request(320), {{&a, View(1, 5)}})[0], 0.62);
  a.pending_prefill_tokens = 5000;  // saturates at 1
  EXPECT_DOUBLE_EQ(
      Costs(*NewTokenLoadScorer({.token_limit = 2000}), Request(320), {{&a, View(1, 5)}})[0], 1.0);
}

TEST(DynamoCostScorerTest, SharedTierCreditFollowsItsWeight) {
  WorkerSnapshot a = Worker(1);
  // 20 blocks all in the shared pool: credit 20 * 0.5 = 10; cost = (20 - 10) + (0 + 20) = 30
  EXPECT_DOUBLE_EQ(Costs(*NewDynamoCostScorer({.shared_weight = 0.5}), Request(320),
                         {{&a, View(1, 0, 0, 0, 20)}})[0],
                   30.0);
}

TEST(DynamoCostScorerTest, PrefillTermNeverGoesNegative) {
  WorkerSnapshot a = Worker(1);
  // Full GPU hit, no pending: raw 20 - credit 20 = 0 (and a scale of 2 keeps it 0); decode 0.
  EXPECT_DOUBLE_EQ(Costs(*NewDynamoCostScorer({.prefill_load_scale = 2.0}), Request(320),
                         {{&a, View(1, 20)}})[0],
                   0.0);
}

}  // namespace
}  // namespace kvroute::sched
