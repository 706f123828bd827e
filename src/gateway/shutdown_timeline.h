// The shutdown timeline of one `kvroute serve` replica (docs/shutdown.md), as numbers from its
// configuration, and the invariants between them that an operator can break:
//
//   t = 0        SIGTERM: /ready answers 503; requests are still accepted and routed
//   t = G        G = shutdown_grace_s: the listener closes (new connections refused, idle
//                keep-alive connections closed); in-flight requests and streams continue
//   t ≤ G + D    D = drain_timeout_s: every in-flight request has finished or is cut now
//   t ≤ G + D + T   T = kShutdownTeardownS: the process has exited (cut connections end,
//                threads join)
//
//   1. balancer_notice_s ≤ G: the balancer in front stops choosing this replica (its probe
//      period × failure threshold after /ready turned 503) before the listener closes;
//      otherwise it still sends connections that are refused.
//   2. termination_grace_s ≥ G + D + T: the orchestrator's SIGKILL (Kubernetes
//      terminationGracePeriodSeconds, counted from the preStop hook, which kvroute does not
//      need) comes after the exit; otherwise streams that the drain would finish are killed.
//
// Both inputs are optional (0: not said); an unset one checks nothing.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "gateway/config.h"

namespace kvroute::gateway {

// Upper bound of the time from the drain deadline to the exit: net::ServerOptions::cut_wait
// (5 s, how long cut connections get to end) plus stopping the remaining parts.
inline constexpr double kShutdownTeardownS = 6.0;

struct ShutdownTimeline {
  double readiness_false_s = 0;  // /ready → 503
  double listener_closed_s = 0;  // G
  double drained_by_s = 0;       // G + D
  double exited_by_s = 0;        // G + D + T
};

ShutdownTimeline TimelineOf(const GatewayConfig& config);

// One line per broken invariant, naming the keys and the numbers; empty when none is.
std::vector<std::string> ShutdownWarnings(const GatewayConfig& config);

}  // namespace kvroute::gateway
