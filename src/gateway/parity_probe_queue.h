// ParityProbeQueue: the start probe (parity_probe.h) for workers that join a running gateway
// (etcd, Kubernetes; Gateway::JoinWorker), run off the caller's thread. A probe takes up to a
// few seconds (it waits for the engine's KV event); discovery must not stall behind it, so a
// join only queues the worker and this queue's one thread probes what has gathered, all of it
// at once (ProbeWorkers probes a batch in parallel), batch after batch.
//
// Held, not run, until Start: the gateway starts it after its start probe, which covers every
// worker present then (the callback skips those), so no worker is probed twice or missed.
//
// Ownership: owns its thread. Thread safety: Enqueue from any thread; Start and Stop from one.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/types.h"

namespace kvroute::gateway {

class ParityProbeQueue {
 public:
  // Probes one batch; runs on the queue's thread, never concurrently with itself.
  using ProbeBatch = std::function<void(const std::vector<WorkerId>&)>;

  // `capacity` bounds the workers waiting (joins beyond it are not probed, and say so).
  explicit ParityProbeQueue(ProbeBatch probe, std::size_t capacity = 1024);
  ~ParityProbeQueue();  // Stop()
  ParityProbeQueue(const ParityProbeQueue&) = delete;
  ParityProbeQueue& operator=(const ParityProbeQueue&) = delete;

  // Queues `worker`; false (nothing queued) when full or stopped.
  bool Enqueue(WorkerId worker);
  void Start();
  // Drops what waits, lets the batch being probed finish, joins. Idempotent.
  void Stop();
  std::size_t pending() const;

 private:
  void Run();

  const ProbeBatch probe_;
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WorkerId> waiting_;  // guarded by mu_
  bool stop_ = false;              // guarded by mu_
  std::thread thread_;             // started by Start, joined by Stop
};

}  // namespace kvroute::gateway
