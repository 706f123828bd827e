// RouterState: everything the router knows about its workers, in one place with no I/O
// (DESIGN "Router state: one home"), and the one Snapshot() that sched::Policy::Decide reads.
// `kvroute serve` feeds it from sockets (config, proxy, scraper, health checker);
// `kvroute simulate` from virtual-time events. Neither keeps a copy of any of it.
//
// Source of truth per snapshot field (README.md "Source of truth"):
//   id, name, models, role                      WorkerSpec (Add)
//   healthy, draining                           WorkerHealth (owned): request outcomes,
//                                               probes, drain, SetDown
//   inflight, pending prefill, active KV        LoadTracker (owned): the booking calls below
//   wait_correction                             LoadTracker's calibration, at `now`
//   prefill rate, decode model                  RateLearner (owned), seeded from the profile
//                                               at Add, learned from the bookings' timings;
//                                               the peer prior (PeerPools)
//   scraped (waiting, running, KV usage, age)   last EngineMetrics (SetMetrics), only while
//                                               younger than metrics_max_age
//   KV capacity                                 scraped num_gpu_blocks in our block size,
//                                               else WorkerSpec, else the profile
//   KV bytes per block                          profile (KV bytes/token x block size)
//   tp, gpus, KV transfer bytes per block       WorkerSpec, else the profile (Add)
//   KV link bandwidth and latency               LinkLearner (owned), seeded from the spec's
//                                               link, learned from OnKvTransfer; rewritten
//                                               at every Refresh
//   tier load bandwidths                        TierLoadLearner (owned), seeded from the
//                                               spec's, learned from first tokens and
//                                               OnTierLoad; rewritten at every Refresh
//
// Booking (one API, one call per event of a routed request, from whoever sees it):
//   Book          the decision is made (fleet/booking.h computes what to book)
//   OnFirstToken  the first output token (a prefill sample; releases pending prefill)
//   OnToken       later tokens (decode samples; the proxy reports them in windows)
//   OnDone        completion, success or failure (frees everything the request held)
//   Cancel        the booking is withdrawn before the worker saw the request
// Every Book is released exactly once, by OnDone or Cancel; later calls are ignored.
// A BookingListener (SetBookingListener) hears Book, the first OnFirstToken and every
// OnDone/Cancel after the tracker has applied them: how a replica publishes its bookings to
// its siblings (gateway/replica_delta_publisher.h); remote ones come back in through Book.
//
// Ownership: owns specs, health, load, rates, pools and metrics. Time is an argument
// (monotonic Nanos); no clock is read. Thread safety: every method may be called from any
// thread. The table (specs, metrics, pools, link and tier learners) is under one shared
// mutex; health, load and rates have their own locks; lock order is table → part, never the
// reverse. Book prices a booking's tier loads under the table lock (shared) and releases it
// before the tracker's; OnFirstToken releases the tracker's before learning under the table
// lock (exclusive), so the tier learners never nest inside another lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"
#include "engine/profile.h"
#include "fleet/link_learner.h"
#include "fleet/load_tracker.h"
#include "fleet/peer_pool.h"
#include "fleet/rate_learner.h"
#include "fleet/scraped_metrics.h"
#include "fleet/tier_load_learner.h"
#include "fleet/worker_health.h"
#include "fleet/worker_spec.h"
#include "sched/types.h"

namespace kvroute::fleet {

struct RouterStateOptions {
  HealthOptions health;
  RateLearnerOptions rates;
  PeerPriorOptions peer_prior;
  // Scraped metrics older than this are left out of the snapshot: an old queue length
  // misleads more than none. Capacity learned from them is kept (it does not change).
  Nanos metrics_max_age = std::chrono::seconds(10);
  // Add() gives a worker without a CPU-tier bandwidth the engine model's (what `kvroute sim`
  // charges for a CPU-tier hit), so predicted_ttft does not treat blocks held only in host
  // memory as recomputed. kvroute simulate turns it off and passes its engines' own.
  bool default_cpu_tier_bandwidth = true;
  // Learn each worker's lower-tier load bandwidths (TierLoadLearner) and give the snapshot
  // the learned values; off: the snapshot carries the spec's, as before issue 20's learner.
  bool learn_tier_bandwidths = true;
  TierLoadLearnerOptions tier_learner;
  TierAttributionOptions tier_attribution;
};

// Snapshots kept between decisions by one caller (kvroute simulate, one thread): Refresh
// rewrites only what can have changed — the calibration, capacity, metrics and pooled rates
// at every call; load and own decode model only for workers whose LoadTracker version moved;
// health only when WorkerHealth's version moved — so a decision over
// 1,000 workers does not re-read 1,000 estimates and statuses. Same values as
// Snapshot(now, "").
class SnapshotCache {
 public:
  // Every worker of the table, by id (removed ones absent, so the position is the id while
  // none was removed; down ones present with healthy = false).
  std::vector<sched::WorkerSnapshot>& workers() { return rows_; }
  const std::vector<sched::WorkerSnapshot>& workers() const { return rows_; }

 private:
  friend class RouterState;
  std::vector<sched::WorkerSnapshot> rows_;
  // The LoadTracker version each row's load was read at; nullopt: never read.
  std::vector<std::optional<std::uint64_t>> versions_;
  std::vector<char> lent_;               // the row carries its peers' decode model
  std::uint64_t health_version_ = ~std::uint64_t{0};
  std::uint64_t table_version_ = ~std::uint64_t{0};
};

// Hears the booking calls (after they are applied, with no lock of RouterState held, on the
// caller's thread). Implementations must be thread-safe and may call RouterState's const
// queries (VisitSpec) but no booking call.
class BookingListener {
 public:
  virtual ~BookingListener() = default;
  virtual void OnBooked(RequestId id, const RoutedRequest& booking) = 0;  // Book succeeded
  virtual void OnFirstToken(RequestId id) = 0;  // the first OnFirstToken of a known request
  virtual void OnReleased(RequestId id) = 0;    // every OnDone and Cancel, known id or not
};

class RouterState {
 public:
  explicit RouterState(RouterStateOptions options = {});
  RouterState(const RouterState&) = delete;
  RouterState& operator=(const RouterState&) = delete;

  // --- The worker table.
  // Validates the spec (name unique and non-empty, a model, block_size > 0, speedup > 0,
  // profile loads and seeds rates), assigns the next id (dense from 0, never reused), seeds
  // its rates, marks it healthy.
  std::expected<WorkerId, std::string> Add(WorkerSpec spec, Nanos now);
  // The same with the profile already loaded (kvroute simulate's engines carry theirs).
  std::expected<WorkerId, std::string> Add(WorkerSpec spec, const engine::Profile& profile,
                                           Nanos now);
  // Forgets the worker: health, load, rates, metrics, its share of the pool. False if unknown.
  bool Remove(WorkerId worker);

  std::vector<WorkerInfo> List() const;  // by id
  std::optional<WorkerInfo> Find(WorkerId worker) const;
  std::optional<WorkerId> FindByName(std::string_view name) const;
  // Non-copying queries for the request path (List/Find copy whole specs). `fn` runs under
  // the table's shared lock and must not call back into this object.
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

  // --- Health: request outcomes and probes (OnSuccess/OnFailure), drain, down.
  WorkerHealth& health() { return health_; }
  const WorkerHealth& health() const { return health_; }

  // --- Scraped engine metrics (the snapshot shows them with their age). Tier load counters
  // that grew since the worker's last scrape teach its tier learner (Δbytes in Δseconds ÷
  // profile_speedup, as OnTierLoad); a counter that went back (a restart) teaches nothing.
  void SetMetrics(WorkerId worker, EngineMetrics metrics);
  void ClearMetrics(WorkerId worker);  // the worker restarted: its last scrape says nothing
  std::optional<EngineMetrics> Metrics(WorkerId worker) const;

  // --- Booking (see the header). Returns false (and books nothing) if `id` is in flight.
  bool Book(RequestId id, const RoutedRequest& booking, Nanos now);
  void OnFirstToken(RequestId id, Nanos now);
  void OnToken(RequestId id, Nanos now, std::uint32_t tokens = 1);
  void OnDone(RequestId id, Nanos now, bool ok);
  void Cancel(RequestId id, Nanos now);
  // Drops every booking on `worker` (it died); later calls for them are ignored. Rates stay.
  void ForgetBookings(WorkerId worker);
  // The listener of the calls above (null: none). Set it before the first booking call and
  // clear it only once no booking call can run; it must outlive its setting.
  void SetBookingListener(BookingListener* listener) { listener_.store(listener); }

  // --- P/D: one finished KV pull into `decode_worker` (bytes over `lanes` NIC lanes, its
  // observed duration) teaches that worker's link bandwidth. False if unknown or rejected.
  bool OnKvTransfer(WorkerId decode_worker, double bytes, std::uint32_t lanes, double seconds);
  // The worker's link learner (a copy); nullopt if unknown.
  std::optional<LinkLearner> Link(WorkerId worker) const;

  // --- Tiers: one finished load of `bytes` from `tier` into `worker`'s GPU memory that took
  // `seconds`, as the engine reports it (vLLM's kv_offload counters between two scrapes).
  // Preferred over what first tokens imply (TierLoadLearner). False if unknown or rejected.
  bool OnTierLoad(WorkerId worker, Tier tier, double bytes, double seconds);
  // The worker's tier learner (a copy); nullopt if unknown.
  std::optional<TierLoadLearner> TierLoads(WorkerId worker) const;

  // --- Reads for metrics, admin endpoints and reports.
  const LoadTracker& load() const { return load_; }
  const RateLearner& rates() const { return rates_; }

  // --- The snapshot Decide reads: one per worker serving `model` (every worker when empty),
  // by id; removed workers absent, ejected/draining/down ones present with their flags.
  std::vector<sched::WorkerSnapshot> Snapshot(Nanos now, std::string_view model) const;
  // The same for every worker, into `cache`, re-reading only what changed (SnapshotCache).
  void Refresh(Nanos now, SnapshotCache* cache) const;

 private:
  struct Entry {
    WorkerSpec spec;
    std::optional<std::uint64_t> profile_capacity_blocks;
    std::optional<double> kv_bytes_per_block;
    std::optional<double> kv_transfer_bytes_per_block;
    LinkLearner link;  // seedless when the worker has no link
    TierLoadLearner tiers;  // seeded from spec.tier_load_bytes_per_s
    std::optional<EngineMetrics> metrics;
  };
  // REQUIRES: mu_ held (shared is enough).
  static void FillSpec(WorkerId id, const Entry& e, sched::WorkerSnapshot* s);
  // Calibration, capacity, metrics and pooled rates at every call; load and own decode model
  // unless `known_version` is the tracker's and the decode model stays own or stays lent;
  // health when `read_health`. Returns the tracker version read and whether decode was lent.
  // REQUIRES: mu_ held (shared is enough).
  std::pair<std::uint64_t, bool> FillState(WorkerId id, const Entry& e, Nanos now,
                                           std::optional<std::uint64_t> known_version,
                                           bool was_lent, bool read_health,
                                           sched::WorkerSnapshot* s) const;
  // The tier bandwidths the snapshot carries: learned, or the spec's when learning is off.
  TierLoadLearner::Bandwidths TierBandwidths(const Entry& e) const;
  // Fills booking->tier_load_bytes / predicted_load_s (sched::PlanLoad at the worker's
  // bandwidths now). Takes mu_ shared.
  void PriceTierLoads(RoutedRequest* booking) const;
  // Takes mu_ exclusively: the worker's share of the pool moves; with `observed`, a first
  // token's tier-load sample (AttributeTierLoad) is learned.
  void UpdatePool(WorkerId worker, const FirstTokenObservation* observed = nullptr);

  const RouterStateOptions options_;
  WorkerHealth health_;
  RateLearner rates_;
  LoadTracker load_;  // after rates_: it borrows it
  mutable std::shared_mutex mu_;
  std::map<WorkerId, Entry> workers_;  // guarded by mu_
  PeerPools pools_;                    // guarded by mu_
  WorkerId next_id_ = 0;               // guarded by mu_
  std::uint64_t table_version_ = 0;    // guarded by mu_; bumped by Add and Remove
  std::atomic<BookingListener*> listener_{nullptr};
};

}  // namespace kvroute::fleet
