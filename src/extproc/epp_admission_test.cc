// The picker's request headers → priority, and the saturation predicate on scraped metrics.
#include "extproc/epp_admission.h"

#include <gtest/gtest.h>

#include "extproc/epp_policy.h"

namespace kvroute::extproc {
namespace {

const EppAdmissionOptions kOptions{.objective_priority = {{"batch", -1}, {"chat", 10}},
                                   .queue_depth = 5, .kv_usage = 0.8, .metrics_max_age_s = 2.0};
const EppPolicy kPolicy(kOptions.objective_priority);
const std::function<int(std::string_view)> kPriority = [](std::string_view o) { return kPolicy.Priority(o); };

TEST(ReadObjective, TheObjectiveNamesThePriorityUnknownOrNoneIsZero) {
  auto batch = ReadObjective({{"x-gateway-inference-objective", "batch"},
                              {"x-gateway-inference-fairness-id", "tenant-7"},
                              {"x-gateway-model-name-rewrite", "qwen-small"}},
                             kPriority);
  EXPECT_EQ(batch.priority, -1);
  EXPECT_TRUE(batch.sheddable());
  EXPECT_EQ(batch.fairness_id, "tenant-7");
  EXPECT_EQ(batch.model_rewrite, "qwen-small");
  EXPECT_EQ(ReadObjective({{"x-gateway-inference-objective", "chat"}}, kPriority).priority, 10);
  EXPECT_EQ(ReadObjective({{"x-gateway-inference-objective", "nope"}}, kPriority).priority, 0);
  EXPECT_FALSE(ReadObjective({}, kPriority).sheddable());
}

fleet::EngineMetrics Scrape(Nanos at, std::uint32_t waiting, double kv) {
  fleet::EngineMetrics m;
  m.scraped_at = at;
  m.num_waiting = waiting;
  m.kv_usage = kv;
  return m;
}

TEST(WorkerSaturation, QueueOrKvAtTheThresholdSaturates) {
  const Nanos now = FromSeconds(100);
  EXPECT_EQ(WorkerSaturation(Scrape(now, 4, 0.79), now, kOptions), Saturation::kRoom);
  EXPECT_EQ(WorkerSaturation(Scrape(now, 5, 0.1), now, kOptions), Saturation::kQueueFull);
  EXPECT_EQ(WorkerSaturation(Scrape(now, 0, 0.8), now, kOptions), Saturation::kKvFull);
}

TEST(WorkerSaturation, NoFreshScrapeShowsNoRoom) {
  const Nanos now = FromSeconds(100);
  EXPECT_EQ(WorkerSaturation(std::nullopt, now, kOptions), Saturation::kNoFreshScrape);
  EXPECT_EQ(WorkerSaturation(Scrape(now - FromSeconds(3), 0, 0.0), now, kOptions), Saturation::kNoFreshScrape);
  EXPECT_EQ(WorkerSaturation(Scrape(now - FromSeconds(1), 0, 0.0), now, kOptions), Saturation::kRoom);
}

}  // namespace
}  // namespace kvroute::extproc
