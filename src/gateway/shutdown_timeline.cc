#include "gateway/shutdown_timeline.h"

#include <cstdio>

namespace kvroute::gateway {
namespace {

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

}  // namespace

ShutdownTimeline TimelineOf(const GatewayConfig& c) {
  ShutdownTimeline t;
  t.listener_closed_s = c.shutdown_grace_s;
  t.drained_by_s = c.shutdown_grace_s + c.drain_timeout_s;
  t.exited_by_s = t.drained_by_s + kShutdownTeardownS;
  return t;
}

std::vector<std::string> ShutdownWarnings(const GatewayConfig& c) {
  std::vector<std::string> out;
  const ShutdownTimeline t = TimelineOf(c);
  if (c.balancer_notice_s > 0 && c.balancer_notice_s > c.shutdown_grace_s) {
    out.push_back("shutdown: balancer_notice_s (" + Seconds(c.balancer_notice_s) +
                  ") > shutdown_grace_s (" + Seconds(c.shutdown_grace_s) +
                  "): the listener closes before the balancer stops sending new connections, "
                  "which are then refused; raise shutdown_grace_s to at least " +
                  Seconds(c.balancer_notice_s));
  }
  if (c.termination_grace_s > 0 && c.termination_grace_s < t.exited_by_s) {
    out.push_back("shutdown: termination_grace_s (" + Seconds(c.termination_grace_s) +
                  ") < shutdown_grace_s + drain_timeout_s + teardown (" +
                  Seconds(c.shutdown_grace_s) + " + " + Seconds(c.drain_timeout_s) + " + " +
                  Seconds(kShutdownTeardownS) + " = " + Seconds(t.exited_by_s) +
                  "): SIGKILL may cut streams the drain would finish; raise the orchestrator's "
                  "grace period or lower drain_timeout_s");
  }
  return out;
}

}  // namespace kvroute::gateway
