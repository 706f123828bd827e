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
// Thread safety: WorkerHealth methods take one internal mutex. HealthChecker owns one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/types.h"

namespace kvroute::client {
class BlockingHttpClient;
}

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

struct ProbeTarget {
  WorkerId worker = 0;
  std::string base_url;  // http://host:port
};

struct HealthCheckerOptions {
  std::chrono::milliseconds interval{5'000};
  std::chrono::milliseconds timeout{2'000};  // per probe, whole exchange
  std::string path = "/health";
};

// Every interval: asks `targets` whom to probe, GETs <base_url><path> of each in turn (one
// round never overlaps the next), and reports 2xx as success, anything else as failure, to
// `health` with the clock's time.
class HealthChecker {
 public:
  using TargetsFn = std::function<std::vector<ProbeTarget>()>;
  HealthChecker(HealthCheckerOptions options, TargetsFn targets, WorkerHealth* health,
                const Clock* clock);
  ~HealthChecker();  // Stop()
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  void Start();
  void Stop();  // idempotent; returns within one probe timeout
  std::uint64_t rounds() const { return rounds_.load(); }
  // Probes once, synchronously, on the calling thread (tests, start-up).
  void RunOnce();

 private:
  void Loop();

  const HealthCheckerOptions options_;
  const TargetsFn targets_;
  WorkerHealth* const health_;
  const Clock* const clock_;
  std::unique_ptr<client::BlockingHttpClient> http_;
  std::atomic<std::uint64_t> rounds_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace kvroute::gateway
