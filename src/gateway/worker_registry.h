// WorkerRegistry: the list of workers kvroute routes to (static, from the config file) and
// their runtime state, assembled into sched::WorkerSnapshot for each scheduling decision.
//
// Source of truth per value (gateway/README.md "Worker state"):
//   identity, models, role, labels, tier bandwidths   WorkerSpec (config)
//   healthy / draining                                WorkerHealth (owned here)
//   inflight, pending prefill, active KV blocks       LoadTracker (owned here)
//   learned prefill rate, decode step model           RateLearner (owned here), seeded from
//                                                     the worker's profile at Add(); until
//                                                     a worker has samples of its own, its
//                                                     same-profile peers' (PeerPrior)
//   queue length, KV usage (with age)                 last EngineMetrics (SetMetrics)
//   KV capacity                                       scraped cache_config_info num_gpu_blocks,
//                                                     else spec override, else profile
//   KV bytes per block                                profile (KV bytes/token x block size)
// Scraped metrics older than `metrics_max_age` are left out of the snapshot (stale values
// mislead more than missing ones); capacity learned from cache_config_info is kept (config).
//
// Ownership: owns specs, health, load and rates. Time is an argument (pure, reusable by
// kvroute simulate). Thread safety: every method may be called from any thread; the spec list
// is under a shared mutex; the owned parts have their own locks.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/types.h"
#include "gateway/engine_metrics.h"
#include "gateway/kv_feed.h"
#include "gateway/load_tracker.h"
#include "gateway/rate_learner.h"
#include "gateway/worker_health.h"
#include "kv/kv_event.h"
#include "sched/types.h"

namespace kvroute::gateway {

struct WorkerSpec {
  std::string name;      // unique
  std::string base_url;  // http://host:port
  std::vector<std::string> models;
  sched::Role role = sched::Role::kMixed;
  std::map<std::string, std::string> labels;
  std::optional<KvEventSpec> kv_events;  // absent: no events (approximate mode)
  std::string profile;  // engine profile name or path; empty: engine::kDefaultProfileName
  // The engine runs this many times faster than `profile` (a `kvroute sim --speedup` fleet):
  // Add() divides the profile's seed times by it and multiplies the default CPU tier
  // bandwidth by it, so a sped-up fleet is not seeded 10x slow until samples arrive. > 0.
  double profile_speedup = 1;
  std::uint32_t block_size = 16;                    // engine KV block size, tokens
  std::optional<std::uint64_t> kv_capacity_blocks;  // override of the profile's
  // Bandwidth to load a block into GPU memory from each tier, bytes/s (kv::Tier order).
  // Add() fills a missing CPU entry with the engine model's host-to-GPU bandwidth.
  std::array<std::optional<double>, kv::kNumTiers> tier_load_bytes_per_s{};
};

struct WorkerInfo {
  WorkerId id = 0;
  WorkerSpec spec;
};

struct RegistryOptions {
  HealthOptions health;
  RateLearnerOptions rates;
  Nanos metrics_max_age = std::chrono::seconds(10);
  // PeerPrior: a worker with fewer than `peer_prior_min_samples` samples of its own (prefill
  // and decode counted apart) is given, in the snapshot, the sample-weighted mean of the
  // learned rates of the workers with the same profile that have at least that many. Why:
  // its own estimate still sits at the profile's seed, while a used peer's follows what was
  // measured; when the seed is off (an engine faster or slower than its profile, a sim run
  // at --speedup 10 whose wall-clock rates are 10x the seed's) the used worker looks that
  // many times faster or slower than every idle one, and predicted_ttft then sent every new
  // session to the one used worker (live bench compare, issues 5/6: all sessions on one
  // worker at c = 4..16). Default: the learner's prior weight, below which the seed dominates.
  bool peer_prior = true;
  double peer_prior_min_samples = 10;
  // Past min_samples, a worker's prefill rate is still shrunk toward its peers' pooled rate
  // (gateway::ShrinkTowardPeers, the pool worth this many samples): identical workers'
  // estimates scatter up to 1.4x and predicted_ttft would read that as speed. 0 = none.
  // 100: in kvroute simulate (Mooncake trace, 8 and 64 workers, arrivals x1.5..x4) mean SLO
  // attainment 0.278 -> 0.308 (llmd_sticky 0.308); 300 gave 0.309, full pooling 0.298.
  double peer_prefill_prior_samples = 100;
};

class WorkerRegistry {
 public:
  explicit WorkerRegistry(RegistryOptions options = {});

  // Validates the spec (name unique and non-empty, base URL parses, at least one model,
  // block_size > 0, profile loads), assigns the next dense id, seeds its rates, marks it
  // healthy.
  std::expected<WorkerId, std::string> Add(WorkerSpec spec, Nanos now);
  // Forgets the worker (health removed, load and rates dropped). False if unknown.
  bool Remove(WorkerId worker);

  std::vector<WorkerInfo> List() const;  // by id
  std::optional<WorkerInfo> Find(WorkerId worker) const;

  // Non-copying queries for the request path: List()/Find() copy whole specs (name, models,
  // labels, profile: several allocations each), per request, to read one field. `fn` runs
  // under the registry's shared lock and must not call back into the registry.
  // VisitSpec: fn(const WorkerSpec&) for `worker`; false if it is unknown.
  template <typename Fn>
  bool VisitSpec(WorkerId worker, Fn&& fn) const {
    std::shared_lock lock(mu_);
    auto it = workers_.find(worker);
    if (it == workers_.end()) return false;
    fn(static_cast<const WorkerSpec&>(it->second.spec));
    return true;
  }
  // AnySpec: whether pred(const WorkerSpec&) holds for some worker (stops at the first).
  template <typename Pred>
  bool AnySpec(Pred&& pred) const {
    std::shared_lock lock(mu_);
    for (const auto& [id, e] : workers_) {
      if (pred(static_cast<const WorkerSpec&>(e.spec))) return true;
    }
    return false;
  }
  std::optional<WorkerId> FindByName(std::string_view name) const;

  void SetMetrics(WorkerId worker, EngineMetrics metrics);
  std::optional<EngineMetrics> Metrics(WorkerId worker) const;

  // One snapshot per worker that serves `model` (every worker when `model` is empty),
  // by id; removed workers are absent, ejected/draining ones present with their flags.
  std::vector<sched::WorkerSnapshot> Snapshot(Nanos now, std::string_view model) const;

  WorkerHealth& health() { return health_; }
  LoadTracker& load() { return load_; }
  RateLearner& rates() { return rates_; }
  const WorkerHealth& health() const { return health_; }
  const LoadTracker& load() const { return load_; }
  const RateLearner& rates() const { return rates_; }

 private:
  struct Entry {
    WorkerSpec spec;
    std::optional<std::uint64_t> profile_capacity_blocks;
    std::optional<double> kv_bytes_per_block;
    std::optional<EngineMetrics> metrics;
  };

  const RegistryOptions options_;
  WorkerHealth health_;
  RateLearner rates_;
  LoadTracker load_;  // after rates_: it borrows it
  mutable std::shared_mutex mu_;
  std::map<WorkerId, Entry> workers_;  // guarded by mu_
  WorkerId next_id_ = 0;               // guarded by mu_
};

}  // namespace kvroute::gateway
