// HealthChecker against a loopback server: probe outcomes drive fleet::WorkerHealth.
#include "gateway/health_checker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "net/http_server.h"

namespace kvroute::gateway {
namespace {

using fleet::HealthState;
using fleet::WorkerHealth;

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
