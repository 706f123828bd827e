// The shutdown timeline's numbers and the two invariants config check warns about.
#include "gateway/shutdown_timeline.h"

#include <gtest/gtest.h>

namespace kvroute::gateway {
namespace {

GatewayConfig Config(double grace, double drain) {
  GatewayConfig c;
  c.shutdown_grace_s = grace;
  c.drain_timeout_s = drain;
  return c;
}

TEST(ShutdownTimelineTest, MilestonesFollowGraceThenDrainThenTeardown) {
  const ShutdownTimeline t = TimelineOf(Config(2, 30));
  EXPECT_EQ(t.readiness_false_s, 0);
  EXPECT_EQ(t.listener_closed_s, 2);
  EXPECT_EQ(t.drained_by_s, 32);
  EXPECT_EQ(t.exited_by_s, 32 + kShutdownTeardownS);
}

TEST(ShutdownTimelineTest, UnsetInputsCheckNothing) {
  EXPECT_TRUE(ShutdownWarnings(Config(0, 86400)).empty());
}

TEST(ShutdownTimelineTest, WarnsWhenTheBalancerNoticesAfterTheListenerCloses) {
  GatewayConfig c = Config(1, 30);
  c.balancer_notice_s = 1;
  EXPECT_TRUE(ShutdownWarnings(c).empty());
  c.balancer_notice_s = 10;
  auto w = ShutdownWarnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("balancer_notice_s (10 s) > shutdown_grace_s (1 s)"), std::string::npos)
      << w[0];
}

TEST(ShutdownTimelineTest, WarnsWhenSigkillComesBeforeTheExit) {
  GatewayConfig c = Config(1, 30);
  c.termination_grace_s = 1 + 30 + kShutdownTeardownS;
  EXPECT_TRUE(ShutdownWarnings(c).empty());
  c.termination_grace_s = 30;  // Kubernetes' default against the default drain
  auto w = ShutdownWarnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("termination_grace_s (30 s) < shutdown_grace_s + drain_timeout_s"),
            std::string::npos)
      << w[0];
  EXPECT_NE(w[0].find("= 37 s"), std::string::npos) << w[0];
}

}  // namespace
}  // namespace kvroute::gateway
