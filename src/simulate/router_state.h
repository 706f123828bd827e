// RouterState: the router-side bookkeeping the live gateway keeps per worker, for the
// simulator — load accounting (what the router has routed and not yet seen finish) and the
// learned rates a policy reads. It mirrors the gateway's LoadTracker/RateLearner contracts
// (src/gateway/load_tracker.h, rate_learner.h): when those land as a library without Beast,
// this file is the one to swap (same call points: route, first token, token, done, forget).
//
// Load, per worker:
//   inflight_requests       +1 on route, -1 on completion
//   pending_prefill_tokens  uncached prompt tokens whose first token has not arrived
//   active_kv_blocks        blocks in-flight requests will hold, freed at completion
// Rates: seeded from the worker's profile (roofline predictions of engine::StepTimeModel);
// prefill throughput is then learned online from queue-free TTFT observations (a request
// routed to a worker with nothing else pending: TTFT ≈ its own prefill) by an exponentially
// weighted mean of tokens/s. The decode step model stays at its profile fit.
//
// Ownership: plain per-worker values; per-request records live in the caller (the simulator
// already has a request table). Thread safety: none (the simulator's one thread).
#pragma once

#include <cstdint>
#include <vector>

#include "common/types.h"
#include "engine/profile.h"
#include "sched/types.h"

namespace kvroute::simulate {

// What the router booked for one request; the caller keeps it and hands it back.
struct Booking {
  WorkerId worker = 0;
  std::uint64_t uncached_tokens = 0;
  std::uint64_t kv_blocks = 0;
  bool queue_free = false;  // nothing else was pending on the worker at route time
  bool first_token_seen = false;
};

// Profile-derived seed of a worker's rates.
struct RateSeed {
  double prefill_tokens_per_s = 0;
  sched::StepTimeModel decode;
  double kv_bytes_per_block = 0;
};
RateSeed SeedRates(const engine::Profile& profile, std::uint32_t block_size);

class RouterState {
 public:
  // Adds (or resets, for a restart) a worker with its rate seed.
  void ResetWorker(WorkerId worker, const RateSeed& seed);
  // Forgets all load of `worker` (it died); its requests' later calls must not be made.
  void ForgetWorker(WorkerId worker);

  Booking OnRouted(WorkerId worker, std::uint64_t uncached_tokens, std::uint64_t kv_blocks);
  void OnFirstToken(Booking* booking, Nanos ttft);
  void OnDone(Booking* booking);

  // Copies load and rates into `snapshot` (router-load and rate fields only).
  void Fill(WorkerId worker, sched::WorkerSnapshot* snapshot) const;

  double learned_prefill_tokens_per_s(WorkerId worker) const {
    return workers_[worker].prefill_tokens_per_s;
  }
  std::uint64_t prefill_samples(WorkerId worker) const { return workers_[worker].samples; }

  // Weight of a new prefill observation in the running mean.
  static constexpr double kPrefillAlpha = 0.05;

 private:
  struct Worker {
    std::uint32_t inflight = 0;
    std::uint64_t pending_prefill = 0;
    std::uint64_t active_blocks = 0;
    double prefill_tokens_per_s = 0;
    std::uint64_t samples = 0;
    sched::StepTimeModel decode;
    double kv_bytes_per_block = 0;
  };
  std::vector<Worker> workers_;
};

}  // namespace kvroute::simulate
