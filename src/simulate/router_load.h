// RouterLoad: the router-side state the live gateway keeps per worker, for the simulator —
// the gateway's own gateway::LoadTracker (what kvroute routed and has not seen finish) and
// gateway::RateLearner (prefill and decode rates learned online, seeded from the profile),
// called where the gateway's proxy calls them, and copied into sched::WorkerSnapshot the way
// gateway::WorkerRegistry::Snapshot does. Nothing here has semantics of its own: what the
// live path books and learns, the simulation books and learns.
//
// Call points (gateway/proxy.cc):
//   OnRouted      the decision is made: prompt, uncached tokens (prompt − any-tier prefix
//                 the router saw), KV blocks (⌈(prompt + max_tokens) / block⌉)
//   OnFirstToken  the first output token is visible (a prefill observation)
//   OnToken       each later token (a decode observation when nothing is prefilling)
//   OnDone        completion, success or failure
// Peer prior, as WorkerRegistry::Snapshot with its default RegistryOptions: a worker with
// fewer than kPeerMinSamples prefill samples gets its same-profile peers' pooled rate (the
// sample-weighted harmonic mean over those with that many), one with more its own rate
// shrunk toward the pool (gateway::ShrinkTowardPeers, kPeerPriorSamples). The pool is kept
// incrementally (updated at each prefill sample) so Fill stays O(1) per worker; the prefill
// rate is rewritten at every Fill because a peer's sample moves it. Decode models too, as the
// registry does: a worker with fewer than kPeerMinSamples decode samples is lent the
// sample-weighted mean model of its same-profile peers that have that many (its own, above
// that). The decode pool is refreshed at each first token and completion (a worker's decode
// samples grow per token; per request is enough to cross the threshold within a request or
// two and keeps the per-token path free of pool updates).
// Worker lifecycle: AddWorker seeds rates from the profile (gateway::SeedFromProfile); a
// failed worker's load is forgotten; its learned rates stay (the live registry keeps a
// worker's rates while health checks eject it, and after it comes back).
//
// Cost: the tracker and learner take a mutex and a hash lookup per call (the live path is
// multi-threaded); the simulator calls them once per token. Snapshots are refreshed only for
// workers whose load or rates changed since the last Fill, so a decision over 1,000 workers
// does not read 1,000 estimates.
//
// Ownership: owns the tracker and learner. Thread safety: none (the simulator's one thread).
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "common/types.h"
#include "engine/profile.h"
#include "gateway/load_tracker.h"
#include "gateway/rate_learner.h"
#include "sched/types.h"

namespace kvroute::simulate {

class RouterLoad {
 public:
  explicit RouterLoad(gateway::RateLearnerOptions options = {});

  // A new worker (ids dense from 0): rates seeded from `profile`, KV bytes per block from
  // its KV bytes per token. Error: the profile cannot seed rates.
  std::expected<void, std::string> AddWorker(WorkerId worker, const engine::Profile& profile,
                                             std::uint32_t block_size);
  // The worker died: its in-flight records and load are dropped (later calls for its
  // requests are ignored by the tracker). Rates are kept.
  void ForgetWorker(WorkerId worker);

  void OnRouted(std::uint64_t request, const gateway::RoutedRequest& routed, Nanos now);
  void OnFirstToken(std::uint64_t request, WorkerId worker, Nanos now);
  void OnToken(std::uint64_t request, WorkerId worker, Nanos now);
  void OnDone(std::uint64_t request, WorkerId worker, Nanos now, bool ok);

  // Router-load and rate fields of `snapshot` (inflight, pending prefill, active KV blocks,
  // prefill rate, decode model, KV bytes per block), rewritten only when they changed since
  // this worker's last Fill; the wait correction (time-dependent) at every call.
  // REQUIRES: the same snapshot object for a worker every time.
  void Fill(WorkerId worker, Nanos now, sched::WorkerSnapshot* snapshot);

  const gateway::LoadTracker& tracker() const { return tracker_; }
  const gateway::RateLearner& learner() const { return learner_; }

 private:
  void Touch(WorkerId worker) {
    if (worker < dirty_.size()) dirty_[worker] = 1;
  }

  static constexpr double kPeerMinSamples = 10;     // RegistryOptions::peer_prior_min_samples
  static constexpr double kPeerPriorSamples = 100;  // ::peer_prefill_prior_samples

  struct Pool {  // per profile: sums over workers with >= kPeerMinSamples samples (each kind)
    double weight = 0;
    double s_per_token = 0;  // weighted sum of 1 / rate
    double decode_weight = 0;
    sched::StepTimeModel decode;  // weighted sums of the decode coefficients
  };
  struct Own {  // a worker's last estimates and its shares of its pool
    std::size_t pool = 0;
    double rate = 0;
    double attention_q = 0;  // the prefill curve's shape (RateEstimate::attention_q)
    double samples = 0;
    double weight = 0;
    double s_per_token = 0;
    double decode_samples = 0;
    double decode_weight = 0;
    sched::StepTimeModel decode;  // its decode model times decode_weight
  };
  // Re-reads the worker's estimates and moves its contributions to the pool.
  void UpdateRates(WorkerId worker);

  gateway::RateLearner learner_;
  gateway::LoadTracker tracker_;  // after learner_: it borrows it
  std::vector<char> dirty_;       // per worker: load or rates changed since the last Fill
  std::vector<double> kv_bytes_per_block_;
  std::vector<std::string> pool_names_;  // profile name per pool
  std::vector<Pool> pools_;
  std::vector<Own> own_;  // per worker
};

}  // namespace kvroute::simulate
