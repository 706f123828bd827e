#include "gateway/worker_health.h"

#include <gtest/gtest.h>

#include <atomic>

#include "net/http_server.h"

namespace kvroute::gateway {
namespace {

using std::chrono::seconds;
constexpr WorkerId kW = 4;

class WorkerHealthTest : public ::testing::Test {
 protected:
  WorkerHealth health_{
      {.failures_to_eject = 3, .base_backoff = seconds(1), .max_backoff = seconds(8)}};
  void SetUp() override { health_.Add(kW, Nanos(0)); }
  void Fail(int n, Nanos now) {
    for (int i = 0; i < n; ++i) health_.OnFailure(kW, now);
  }
};

TEST_F(WorkerHealthTest, StartsHealthyAndRoutable) {
  HealthStatus s = health_.Status(kW, Nanos(0));
  EXPECT_EQ(s.state, HealthState::kHealthy);
  EXPECT_TRUE(s.Routable());
}

TEST_F(WorkerHealthTest, EjectsAfterNConsecutiveFailures) {
  Fail(2, seconds(1));
  EXPECT_TRUE(health_.Routable(kW, seconds(1)));
  Fail(1, seconds(1));
  HealthStatus s = health_.Status(kW, seconds(1));
  EXPECT_EQ(s.state, HealthState::kEjected);
  EXPECT_FALSE(s.Routable());
  EXPECT_EQ(s.ejected_until, seconds(2));
}

TEST_F(WorkerHealthTest, ASuccessResetsTheFailureCount) {
  Fail(2, seconds(1));
  health_.OnSuccess(kW, seconds(1));
  Fail(2, seconds(1));
  EXPECT_TRUE(health_.Routable(kW, seconds(1)));
}

TEST_F(WorkerHealthTest, AfterTheBackoffAProbeDecides) {
  Fail(3, seconds(10));
  EXPECT_EQ(health_.Status(kW, seconds(10) + Nanos(999'999'999)).state, HealthState::kEjected);
  EXPECT_EQ(health_.Status(kW, seconds(11)).state, HealthState::kProbing);
  EXPECT_FALSE(health_.Routable(kW, seconds(11)));  // not until the probe succeeds
  health_.OnSuccess(kW, seconds(11));
  EXPECT_TRUE(health_.Routable(kW, seconds(11)));
}

TEST_F(WorkerHealthTest, BackoffDoublesPerFailedProbeUpToTheCap) {
  Fail(3, seconds(10));  // until 11 (1 s)
  std::vector<Nanos> backoffs;
  Nanos now = seconds(11);
  for (int i = 0; i < 5; ++i) {
    health_.OnFailure(kW, now);  // the probe fails
    HealthStatus s = health_.Status(kW, now);
    ASSERT_EQ(s.state, HealthState::kEjected);
    backoffs.push_back(s.ejected_until - now);
    now = s.ejected_until;
  }
  EXPECT_EQ(backoffs,
            (std::vector<Nanos>{seconds(2), seconds(4), seconds(8), seconds(8), seconds(8)}));
}

TEST_F(WorkerHealthTest, BackoffResetsAfterStayingHealthyForTheCap) {
  Fail(3, seconds(10));
  health_.OnFailure(kW, seconds(11));  // probe fails: 2 s
  health_.OnSuccess(kW, seconds(13));  // healthy again
  Fail(3, seconds(14));                // soon after: backoff keeps growing (4 s)
  EXPECT_EQ(health_.Status(kW, seconds(14)).ejected_until, seconds(18));
  health_.OnSuccess(kW, seconds(18));
  Fail(3, seconds(100));  // long healthy: back to the base
  EXPECT_EQ(health_.Status(kW, seconds(100)).ejected_until, seconds(101));
}

TEST_F(WorkerHealthTest, LateSuccessDuringBackoffDoesNotUneject) {
  Fail(3, seconds(10));
  health_.OnSuccess(kW, seconds(10));
  EXPECT_EQ(health_.Status(kW, seconds(10)).state, HealthState::kEjected);
}

TEST_F(WorkerHealthTest, DrainingIsNotRoutableButStaysHealthy) {
  health_.SetDraining(kW, true);
  HealthStatus s = health_.Status(kW, seconds(1));
  EXPECT_EQ(s.state, HealthState::kHealthy);
  EXPECT_TRUE(s.draining);
  EXPECT_FALSE(s.Routable());
  health_.SetDraining(kW, false);
  EXPECT_TRUE(health_.Routable(kW, seconds(1)));
}

TEST_F(WorkerHealthTest, RemovedAndUnknownWorkersAreNeverRoutable) {
  health_.Remove(kW);
  health_.OnSuccess(kW, seconds(1));
  EXPECT_EQ(health_.Status(kW, seconds(1)).state, HealthState::kRemoved);
  EXPECT_EQ(health_.Status(99, seconds(1)).state, HealthState::kRemoved);
  EXPECT_TRUE(health_.ProbeTargets(seconds(1)).empty());
  health_.Add(kW, seconds(2));
  EXPECT_TRUE(health_.Routable(kW, seconds(2)));
}

TEST_F(WorkerHealthTest, ProbeTargetsSkipWorkersInsideTheirBackoff) {
  health_.Add(5, Nanos(0));
  Fail(3, seconds(10));
  EXPECT_EQ(health_.ProbeTargets(seconds(10)), std::vector<WorkerId>{5});
  EXPECT_EQ(health_.ProbeTargets(seconds(11)), (std::vector<WorkerId>{kW, 5}));
}

TEST(HealthCheckerTest, ProbesHealthEndpointsAndEjectsAWorkerThatFails) {
  std::atomic<int> status{200};
  net::HttpServer server({.threads = 1});
  server.Handle("GET", "/health", [&](const net::HttpRequest&) -> net::HandlerResult {
    return net::TextResponse(status.load(), "");
  });
  ASSERT_TRUE(server.Start().has_value());
  ManualClock clock;
  WorkerHealth health({.failures_to_eject = 2});
  health.Add(1, clock.Now());
  health.Add(2, clock.Now());
  const std::string good = "http://127.0.0.1:" + std::to_string(server.port());
  HealthChecker checker(
      {.timeout = std::chrono::milliseconds(2000)},
      [&] {
        return std::vector<ProbeTarget>{{1, good}, {2, "http://127.0.0.1:1"}};
      },
      &health, &clock);
  checker.RunOnce();
  checker.RunOnce();
  EXPECT_TRUE(health.Routable(1, clock.Now()));
  EXPECT_EQ(health.Status(2, clock.Now()).state, HealthState::kEjected);  // refused twice
  status = 503;
  checker.RunOnce();
  checker.RunOnce();
  EXPECT_EQ(health.Status(1, clock.Now()).state, HealthState::kEjected);
  EXPECT_EQ(checker.rounds(), 4u);
  server.Shutdown(std::chrono::milliseconds(0));
}

TEST(HealthCheckerTest, BackgroundLoopRunsRoundsAndStops) {
  ManualClock clock;
  WorkerHealth health;
  HealthChecker checker(
      {.interval = std::chrono::milliseconds(5)}, [] { return std::vector<ProbeTarget>{}; },
      &health, &clock);
  checker.Start();
  for (int i = 0; i < 2000 && checker.rounds() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  checker.Stop();
  EXPECT_GE(checker.rounds(), 3u);
  std::uint64_t after_stop = checker.rounds();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(checker.rounds(), after_stop);
}

}  // namespace
}  // namespace kvroute::gateway
