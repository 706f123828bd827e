// WorkerHealth: the health state machine of every worker, pure (time is an argument). Its
// drivers feed it: the gateway's proxy (request outcomes) and HealthChecker
// (gateway/health_checker.h, GET /health on an interval); the simulator's fleet changes.
//
//   healthy ──N consecutive failures (requests or probes)──▶ ejected(until = now + backoff)
//   ejected ──backoff elapsed──▶ probing (still not routable; the next probe decides)
//   probing ──probe/request success──▶ healthy      probing ──failure──▶ ejected (backoff x2)
// Backoff starts at base_backoff and doubles per ejection up to max_backoff; it resets once
// the worker has stayed healthy for max_backoff. Draining (admin) is a flag on top: a
// draining worker takes no new requests but its in-flight ones finish. Down is another: the
// driver knows the worker is gone (a simulated failure; later a lost registry lease), so it is
// not routable and not probed until the driver says it is back. Remove() is terminal.
//
// Thread safety: WorkerHealth methods take one internal mutex.
#pragma once

#include <chrono>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/types.h"

namespace kvroute::fleet {

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
  bool down = false;  // the driver said the worker is gone (SetDown)
  std::uint32_t consecutive_failures = 0;
  std::uint32_t ejections = 0;  // since the backoff last reset
  Nanos ejected_until{0};       // meaningful when ejected
  std::uint64_t total_ejections = 0;

  // Up: healthy and not known to be down (sched::WorkerSnapshot::healthy).
  bool Up() const { return state == HealthState::kHealthy && !down; }
  // Takes new requests: up and not draining.
  bool Routable() const { return Up() && !draining; }
};

class WorkerHealth {
 public:
  explicit WorkerHealth(HealthOptions options = {});

  void Add(WorkerId worker, Nanos now);  // starts healthy; re-adding a removed worker revives it
  void Remove(WorkerId worker);          // terminal until Add again
  void SetDraining(WorkerId worker, bool draining);
  // The driver knows the worker is gone (down) or back. Failure counts and backoff are kept.
  void SetDown(WorkerId worker, bool down);

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
  // Bumped by every call that may change a status (all but Status, ProbeTargets, version):
  // a caller that kept statuses re-reads them only when it moved (time alone changes only
  // ejected into probing).
  std::uint64_t version() const { return version_.load(std::memory_order_acquire); }

 private:
  struct Entry {
    HealthStatus status;
    Nanos healthy_since{0};
  };
  static void Advance(Entry& e, Nanos now);

  const HealthOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<WorkerId, Entry> workers_;  // guarded by mu_
  std::atomic<std::uint64_t> version_{0};        // bumped under mu_
};

}  // namespace kvroute::fleet
