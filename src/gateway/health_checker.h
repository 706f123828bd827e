// HealthChecker: the thin driver of fleet::WorkerHealth that probes GET /health of every
// worker on an interval and reports each outcome to the state machine.
//
// Thread safety: owns one thread (its PeriodicPoller); WorkerHealth has its own lock.
#pragma once

#include <chrono>
#include <string>

#include "common/clock.h"
#include "fleet/worker_health.h"
#include "gateway/periodic_poller.h"

namespace kvroute::gateway {

using ProbeTarget = PollTarget;

struct HealthCheckerOptions {
  std::chrono::milliseconds interval{5'000};
  std::chrono::milliseconds timeout{2'000};  // per probe, whole exchange
  std::string path = "/health";
};

// Every interval: asks `targets` whom to probe, GETs <base_url><path> of each in turn (one
// round never overlaps the next), and reports 2xx as success, anything else as failure, to
// `health` with the clock's time. The loop, Start/Stop/RunOnce/rounds, is the PeriodicPoller's;
// this class adds only what a probe's outcome means. Stop returns within one probe timeout.
class HealthChecker : public PeriodicPoller {
 public:
  HealthChecker(HealthCheckerOptions options, TargetsFn targets, fleet::WorkerHealth* health,
                const Clock* clock);
};

}  // namespace kvroute::gateway
