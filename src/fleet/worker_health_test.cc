#include "fleet/worker_health.h"

#include <gtest/gtest.h>


namespace kvroute::fleet {
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

TEST_F(WorkerHealthTest, ADownWorkerIsNeitherUpNorProbedUntilItIsBack) {
  health_.SetDown(kW, true);
  EXPECT_FALSE(health_.Status(kW, seconds(1)).Up());
  EXPECT_FALSE(health_.Routable(kW, seconds(1)));
  EXPECT_TRUE(health_.ProbeTargets(seconds(1)).empty());
  health_.SetDown(kW, false);
  EXPECT_TRUE(health_.Routable(kW, seconds(1)));
  EXPECT_EQ(health_.ProbeTargets(seconds(1)), std::vector<WorkerId>{kW});
}

}  // namespace
}  // namespace kvroute::fleet
