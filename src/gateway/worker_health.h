// WorkerHealth: the health state machine of every worker, pure (time is an argument), plus
// HealthChecker, the thin driver that probes GET /health on an interval.
//
//   healthy ──N consecutive failures (requests or probes)──▶ ejected(until = now + backoff)
//   ejected ──backoff elapsed──▶ probing (still not routable; the next probe decides)
//   probing ──probe/request success──▶ healthy      probing ──failure──▶ ejected (backoff x2)
// Backoff starts at base_backoff and doubles per ejection up to max_backoff; it resets once
// the worker has stayed healthy for max_backoff. Draining (admin) is a flag on top: a
// draining worker takes no new requests but its in-flight ones finish; Remove() is terminal.
//
// Thread safety: WorkerHealth methods take one internal mutex. HealthChecker owns one thread
// (its PeriodicPoller).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/types.h"
#include "gateway/periodic_poller.h"

namespace kvroute::gateway {

enum class HealthState : std::uint8_t { kHealthy, kEjected, kProbing, kRemoved };
const char* HealthStateName(HealthState state);

struct HealthOptions {
  std::uint32_t failures_to_eject = 3;  // consecutive failures that eject a worker
  Nanos base_backoff = std::chrono::seconds(1);
  Nanos max_backoff = std::chrono::seconds(60);
};

struct HealthStatus {
  HealthState state = HealthState::kHealthy;
  bool draining = false;
  std::uint32_t consecutive_failures = 0;
  std::uint32_t ejections = 0;  // since the backoff last reset
  Nanos ejected_until{0};       // meaningful when ejected
  std::uint64_t total_ejections = 0;

  // Takes new requests: healthy and not draining.
  bool Routable() const { return state == HealthState::kHealthy && !draining; }
};

class WorkerHealth {
 public:
  explicit WorkerHealth(HealthOptions options = {});

  void Add(WorkerId worker, Nanos now);  // starts healthy; re-adding a removed worker revives it
  void Remove(WorkerId worker);          // terminal until Add again
  void SetDraining(WorkerId worker, bool draining);

  // Outcome of a proxied request or an active probe. Unknown workers are ignored.
  void OnSuccess(WorkerId worker, Nanos now);
  void OnFailure(WorkerId worker, Nanos now);

  // Status with time applied (an ejected worker whose backoff elapsed reads as probing).
  // kRemoved for an unknown worker.
  HealthStatus Status(WorkerId worker, Nanos now) const;
  bool Routable(WorkerId worker, Nanos now) const { return Status(worker, now).Routable(); }
  // Workers an active checker should probe now: every known, non-removed worker except those
  // still inside their ejection backoff.
  std::vector<WorkerId> ProbeTargets(Nanos now) const;

 private:
  struct Entry {
    HealthStatus status;
    Nanos healthy_since{0};
  };
  static void Advance(Entry& e, Nanos now);

  const HealthOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<WorkerId, Entry> workers_;  // guarded by mu_
};

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
  HealthChecker(HealthCheckerOptions options, TargetsFn targets, WorkerHealth* health,
                const Clock* clock);
};

}  // namespace kvroute::gateway
