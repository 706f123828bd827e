// The simulator's internals, shared by simulator.cc (the event loop, aggregated requests)
// and simulator_pd.cc (prefill/decode legs). Private to src/simulate/: not a public header.
//
// Thread safety: none (a Simulator runs on one thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fleet/router_state.h"
#include "kv/index/approx_predicted.h"
#include "kv/index/index.h"
#include "kv/index/index_overlay.h"
#include "engine/step_time.h"
#include "sched/tier_pricing.h"
#include "simulate/event_queue.h"
#include "store/in_process_store.h"
#include "simulate/simulator.h"

namespace kvroute::simulate {
namespace internal {

// Arrival event operand bits.
constexpr std::uint64_t kFromNext = 1;  // pulled from Workload::Next
constexpr std::uint64_t kRouted = 2;    // sent earlier; now past the router delay: route it

struct WorkerState {
  WorkerSpec spec;
  std::unique_ptr<engine::Engine> engine;
  bool alive = false;
  std::uint64_t epoch = 0;  // bumped on failure: stale step ends and deliveries are dropped
  bool stepping = false;
  engine::StepResult pending;  // the step in flight, visible at its end
  engine::EngineStats past;    // counters of earlier lives
  std::uint64_t routed = 0;
  std::uint32_t restarts = 0;
  std::optional<Nanos> wake_at;  // a kWake event is queued for then (P/D timed events)
};

struct LiveRequest {
  bool active = false;
  SimRequest request;
  WorkerId worker = 0;
  Nanos arrival{0};
  Nanos last_token{0};
  bool first_token_seen = false;
  std::vector<TokenId> output;  // only when the workload wants it
  // P/D: a split request runs its prefill leg on `prefill_worker` (worker == it) then its
  // decode leg on `decode_worker` (worker == it).
  bool split = false;
  bool in_decode_leg = false;
  bool prefill_leg_open = false;  // its prefill booking is not yet released
  WorkerId prefill_worker = 0;
  WorkerId decode_worker = 0;
  std::uint32_t prefill_cached_tokens = 0;  // what the client's usage reports (llm-d's merge)
  // The router's credit on `worker` at the decision, in blocks the engine can hit (capped at
  // prompt − 1 tokens): its deepest prefix in any tier, and the part only the store holds.
  std::uint32_t credited_blocks = 0;
  std::uint32_t credited_shared_blocks = 0;
  std::uint32_t kv_blocks = 0;
  // Its row in SimResult::decisions (unsplit routes), to fill in the TTFT parts.
  std::optional<std::size_t> decision_row;
};

// The router's booking id of a split request's prefill leg (its decode leg books `id`), and
// the engine id of that leg ("<id>p": OnStepEnd tells the legs apart by the suffix).
inline constexpr std::uint64_t kPrefillLegBit = std::uint64_t{1} << 63;

// In-flight requests by id. Ids are dense (arrival order), so a vector beats a hash map here
// (one lookup per token); finished rows are reset, which frees their vectors.
class LiveTable {
 public:
  LiveRequest* Find(std::uint64_t id) {
    return id < rows_.size() && rows_[id].active ? &rows_[id] : nullptr;
  }
  void Insert(std::uint64_t id, LiveRequest lr) {
    if (rows_.size() <= id) rows_.resize(id + 1);
    lr.active = true;
    rows_[id] = std::move(lr);
    ++size_;
  }
  // REQUIRES: Find(id) != nullptr.
  LiveRequest Take(std::uint64_t id) {
    LiveRequest lr = std::move(rows_[id]);
    rows_[id] = LiveRequest{};
    --size_;
    return lr;
  }
  // Ids of the in-flight requests on `worker`, ascending.
  std::vector<std::uint64_t> OnWorker(WorkerId worker) const {
    std::vector<std::uint64_t> ids;
    for (std::uint64_t id = 0; id < rows_.size(); ++id) {
      if (rows_[id].active && rows_[id].worker == worker) ids.push_back(id);
    }
    return ids;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  std::vector<LiveRequest> rows_;
  std::size_t size_ = 0;
};

// A slot of `slots` for a new entry: a freed one if any, else a new one at the end (event
// payloads live in slots so an event carries only an index).
template <typename T>
std::uint32_t TakeSlot(std::vector<T>& slots, std::vector<std::uint32_t>& free_slots) {
  if (free_slots.empty()) {
    slots.emplace_back();
    return static_cast<std::uint32_t>(slots.size() - 1);
  }
  const std::uint32_t slot = free_slots.back();
  free_slots.pop_back();
  return slot;
}

struct KvDelivery {
  WorkerId worker = 0;
  std::vector<kv::KvEvent> events;
};

// The router state as kvroute serve configures it, except that each worker's CPU-tier
// bandwidth is its engine's own (none without a CPU tier), not the gateway's default.
inline fleet::RouterStateOptions SimRouterOptions(bool learn_tier_bandwidths = true) {
  fleet::RouterStateOptions o;
  o.default_cpu_tier_bandwidth = false;
  o.learn_tier_bandwidths = learn_tier_bandwidths;
  return o;
}

}  // namespace internal

using internal::KvDelivery;
using internal::LiveRequest;
using internal::LiveTable;
using internal::WorkerState;
using internal::kFromNext;
using internal::kRouted;
using internal::kPrefillLegBit;
using internal::SimRouterOptions;

// Adds `from`'s monotonic counters to `to` (a worker's past lives, simulator_report.cc).
void AddCounters(const engine::EngineStats& from, engine::EngineStats* to);

struct Simulator::Impl {
  Impl(SimOptions o, std::unique_ptr<Workload> w)
      : options(std::move(o)),
        workload(std::move(w)),
        keyer(options.fleet.workers.empty() ? kv::kDefaultBlockSize
                                            : options.fleet.workers.front().config.block_size),
        index(keyer),
        predicted(kv::PredictedOptions{options.predicted_ttl, 1 << 16}),
        policy_state(options.seed),
        router(SimRouterOptions(options.learn_tier_bandwidths)) {
    if (options.shared_store && !options.fleet.workers.empty()) {
      const WorkerSpec& first = options.fleet.workers.front();
      store = std::make_shared<store::InProcessSharedStore>(
          *options.shared_store,
          first.config.block_size * engine::StepTimeModel(first.profile).KvBytesPerTokenTransfer());
    }
  }
  // The store's events since the last call, to the index as one more publisher (after
  // event_delay, as a worker's).
  void DrainStoreEvents(Nanos now) {
    if (store) DeliverKvEvents(sched::kSharedStoreWorker, store->TakeEvents(), 0, now);
  }
  // `events` of worker `w` (or kSharedStoreWorker) into the index now, or after event_delay
  // if the worker's `epoch` is still current then.
  void DeliverKvEvents(WorkerId w, std::vector<kv::KvEvent> events, std::uint64_t epoch, Nanos now);

  std::expected<SimResult, std::string> Run();
  // The end of Run: engine counters, hit rates and the store's counters into `result`
  // (simulator_report.cc).
  void ReportCounters();
  std::expected<void, std::string> AddWorker(const WorkerSpec& spec, Nanos now);
  void StartWorker(WorkerId w);
  // `force`: step even without HasWork (a timed event is due: remote KV, a pin's expiry).
  void StartStep(WorkerId w, Nanos now, bool force = false);
  // --- P/D (simulator_pd.cc).
  // Places and dispatches one arrival by sched::DecidePd (SimOptions::pd).
  std::expected<void, std::string> RoutePd(std::uint64_t id, Arrival a,
                                           const sched::RequestProfile& profile,
                                           DecisionRecord dr, Nanos sent, Nanos now);
  // A token of a prefill leg on `p` (its only one): release its booking, send the decode leg.
  void OnPrefillLegToken(WorkerId p, std::uint64_t id, const engine::TokenEvent& t, Nanos now);
  // What a step of `w` reported at its start: pulls finished (release the prefill's pins,
  // teach the link), pins expired.
  void OnTimedResults(WorkerId w, const engine::StepResult& r, Nanos now);
  // Queues a kWake at the engine's NextTimedEvent when it is idle and one is due.
  void ArmWake(WorkerId w, Nanos now);
  void OnStepEnd(WorkerId w, Nanos now);
  // `routed`: the router delay has passed (the request was sent at its Arrival::at).
  std::expected<void, std::string> OnArrival(std::uint32_t slot, bool from_next, bool routed,
                                             Nanos now);
  Nanos RouterDelay(const SimRequest& r) const {
    return options.router_delay + Nanos(options.router_delay_per_1k_tokens.count() *
                                        static_cast<Nanos::rep>(r.prompt.size()) / 1000);
  }
  void Finish(std::uint64_t id, bool ok, const char* error_kind, Nanos now);
  void FailWorker(WorkerId w, Nanos now);
  void RestartWorker(WorkerId w, Nanos now);
  void Scrape(Nanos now);
  void Schedule(std::optional<Arrival> a, bool from_next);
  void Schedule(std::vector<Arrival> arrivals) {  // a closed loop's follow-ups
    for (Arrival& a : arrivals) Schedule(std::move(a), false);
  }
  void PullNext();
  void Progress(Nanos now, bool final_line);
  bool NeedsScrape() const { return (inputs & sched::kScrapedMetrics) != 0; }

  SimOptions options;
  std::shared_ptr<store::InProcessSharedStore> store;  // SimOptions::shared_store; may be null
  std::unique_ptr<Workload> workload;
  kv::BlockKeyer keyer;
  kv::KvIndex index;
  kv::PredictedBlocks predicted;
  sched::PolicyState policy_state;
  sched::Inputs inputs = sched::kNoInputs;
  EventQueue queue;
  // The router's knowledge of the workers (load, rates, health, scrapes): the same object
  // kvroute serve keeps; `snapshots` is what each decision reads, refreshed in place.
  fleet::RouterState router;
  fleet::SnapshotCache snapshots;
  std::vector<WorkerState> workers;
  LiveTable live;
  std::vector<Arrival> arrival_slots;
  std::vector<std::uint32_t> free_arrival_slots;
  std::vector<KvDelivery> delivery_slots;
  std::vector<std::uint32_t> free_delivery_slots;
  std::size_t pending_arrivals = 0;
  int admitted = 0;  // arrivals accepted under the bounds
  SimResult result;
  Nanos first_arrival{-1};
  Nanos last_done{0};
  std::chrono::steady_clock::time_point wall_start;
  std::chrono::steady_clock::time_point last_progress;
  std::vector<kv::BlockKey> keys;  // scratch
};


}  // namespace kvroute::simulate
