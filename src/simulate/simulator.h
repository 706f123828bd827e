// Simulator: a whole cluster in virtual time — N engine models (engine/), the live router's
// decision path (kv::KvIndex + predicted-blocks overlay → sched::CacheView, router-side load,
// scraped metrics with their age, learned rates → sched::Policy::Decide), a workload, and a
// fleet schedule (failures, restarts, added workers). One run is one benchmark level.
//
// Events (event_queue.h), in virtual time:
//   arrival      build the request profile exactly as the gateway does (token ids →
//                kv::BlockKeyer keys → index lookup with the predicted overlay → cache views),
//                snapshot every worker, Decide, book the load, record the prediction, then
//                Engine::Add on the chosen worker (starting its step loop if idle).
//   step end     the tokens of the step become visible (TTFT, ITL gaps, completions); its KV
//                events are delivered to the index after `event_delay` (at once when 0); the
//                engine steps again if it has work.
//   KV delivery  one step's KV events applied to the index in order.
//   scrape       every `scrape_interval`, each live worker's engine metrics (waiting,
//                running, KV usage) are copied; decisions see them with their age.
//   fleet change a worker fails (its in-flight requests fail, its index entries and load are
//                dropped, it is marked unhealthy), restarts (a fresh engine, empty cache), or
//                new workers join.
//
// Determinism: the same options (seed included) give byte-identical results; nothing depends
// on addresses, wall time or unordered iteration.
//
// Ownership: a Simulator owns its engines, index and workload for one Run. Thread safety:
// none; Run executes on the calling thread.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "workload/report.h"
#include "engine/engine.h"
#include "sched/pd_decision.h"
#include "sched/policy.h"
#include "store/store_core.h"
#include "simulate/fleet.h"
#include "simulate/workload.h"

namespace kvroute::kv {
class KvIndex;
}
namespace kvroute::fleet {
class RouterState;
}

namespace kvroute::simulate {

struct SimOptions {
  Fleet fleet;
  std::shared_ptr<const sched::Policy> policy;
  std::string model = "sim-model";  // served model name every worker serves
  Nanos event_delay{0};             // engine KV event → index
  Nanos scrape_interval{std::chrono::seconds(1)};
  bool predicted_overlay = true;  // predict-on-route entries until events confirm them
  Nanos predicted_ttl{std::chrono::seconds(5)};
  std::uint64_t seed = 1;
  // The router's own time between a client's send and the engine seeing the request (live:
  // request parse, chat template, tokenization, lookup, Decide, forward): each arrival is
  // routed and handed to its engine router_delay + router_delay_per_1k_tokens × prompt/1000
  // after it was sent, and its TTFT and E2E count from the send. Zero (the default): at once.
  Nanos router_delay{0};
  Nanos router_delay_per_1k_tokens{0};
  // Bounds of one level: arrivals after `duration` (when > 0) or beyond `max_requests`
  // (when > 0) are not sent; in-flight requests still finish.
  Nanos duration{0};
  int max_requests = 0;
  bool progress = false;  // progress line on stderr a few times a second
  // The reference path, kept for the equivalence test: every decision records every
  // candidate's trace and every engine step returns a fresh result. Off (the default), only
  // the chosen worker's trace is recorded and step results are reused: same results, a
  // fraction of the CPU at 1,000 workers.
  bool full_trace = false;
  // Prefill/decode orchestration (issue 19): when set, each arrival is placed by
  // sched::DecidePd (aggregated on W, or a prefill leg on P then a decode leg on D pulling
  // P's pinned blocks) instead of the policy; the policy is unused. Unset: the policy decides
  // and no request is split (aggregated fleets run exactly as before).
  std::optional<sched::PdOptions> pd;
  // Test hook: called after each step end is processed (its tokens visible, its KV events
  // applied when the delay is 0).
  std::function<void(WorkerId, Nanos)> on_step_end;
  // The cluster's shared KV store (src/store/, in process, virtual time), one per level: every
  // worker writes through to it and reads from it; its events reach the index after
  // event_delay, as a worker's, under sched::kSharedStoreWorker and count for every worker.
  // Unset: none.
  std::optional<store::StoreOptions> shared_store;
  // Whether the engines lease a queued request's store run (engine::EngineConfig::shared.
  // leases); off: a credited store block may be evicted while its request waits.
  bool store_leases = true;
  // Issue 20's learned tier bandwidths. The router is seeded with each worker's lower-tier
  // load bandwidths (host, disk, store) × router_tier_bandwidth_scale (1: the engine's own;
  // 4: it believes every tier loads 4x faster than the engine does, 0.25: 4x slower); the
  // engine always loads at its own. learn_tier_bandwidths: the router learns them from first
  // tokens (fleet::RouterStateOptions::learn_tier_bandwidths); off: it keeps its seeds.
  double router_tier_bandwidth_scale = 1;
  bool learn_tier_bandwidths = true;
};

// What the router predicted at decision time, and what happened (fidelity hooks).
struct DecisionRecord {
  std::uint64_t request = 0;
  WorkerId worker = 0;
  double at_s = 0;
  std::uint64_t prompt_tokens = 0;
  std::uint64_t predicted_cached_tokens = 0;  // GPU prefix depth the router saw × block size
  std::optional<double> predicted_ttft_s;
  std::uint32_t inflight_at_route = 0;
  std::uint64_t pending_prefill_at_route = 0;
  // The queue-dependent part of predicted_ttft_s and the worker's wait correction in it
  // (fleet::LoadTracker): where a miscalibrated prediction comes from.
  std::optional<double> predicted_wait_s;
  double wait_correction_at_route = 1;
  // P/D runs (SimOptions::pd): whether the request was split, its prefilling worker (== worker
  // when not), the prompt tokens that worker was predicted to compute, and the chosen option's
  // predicted ITL on the decoding worker (sched::PdOption::itl_s), to set beside the measured
  // gaps: what the decision's ITL filter and cost saw against what the decode steps did.
  bool split = false;
  WorkerId prefill_worker = 0;
  std::uint64_t predicted_prefill_tokens = 0;
  std::optional<double> predicted_itl_s;
  // Where the measured TTFT went (engine::TtftParts; unsplit requests that got a first
  // token): arrival to the engine's first commit (queue, token budget, KV memory), then an
  // async tier load's wait behind the loads ahead of it on the tier path, and its own
  // transfer time. The rest of the TTFT is prefill and preemption.
  std::optional<double> engine_wait_s;
  double tier_path_queue_s = 0;
  double tier_transfer_s = 0;
};

struct WorkerReport {
  WorkerId id = 0;
  std::string profile;
  sched::Role role = sched::Role::kMixed;
  bool alive = true;
  int gpus = 1;
  std::uint64_t routed = 0;  // requests routed here
  std::uint32_t restarts = 0;
  engine::EngineStats stats;  // summed over the worker's lives (counters), last life (gauges)
};

// One request's P/D placement (SimOptions::pd runs only).
struct PdRecord {
  std::uint64_t request = 0;
  bool split = false;
  WorkerId prefill = 0;  // == decode when not split
  WorkerId decode = 0;
  std::uint32_t transfer_blocks = 0;  // what the decode engine pulled (its KvTransferDone)
  double transfer_bytes = 0;
  double transfer_s = 0;   // the modelled pull, link sharing included
  double predicted_transfer_s = 0;
  bool transferred = false;  // the pull finished
};

struct SimResult {
  workload::LevelResult level;               // requests in arrival order
  std::vector<DecisionRecord> decisions;  // same order as level.requests
  std::vector<WorkerReport> workers;
  double virtual_s = 0;  // virtual time of the last event
  double wall_s = 0;
  std::uint64_t events = 0;
  std::uint64_t steps = 0;
  int gpus = 0;  // GPUs of the initial fleet
  // Requests an engine refused at admission (vLLM's 400, `http_4xx`: longer than
  // max_model_len, more KV than the whole cache), and the first refusal's reason, so that a
  // run that fails them can say why.
  std::uint64_t rejected = 0;
  std::string first_rejection;
  // P/D (SimOptions::pd): one record per routed request, request order; pinned prefills the
  // prefill engines freed at their timeout (no decoder read them).
  std::vector<PdRecord> pd;
  std::uint64_t pins_expired = 0;
  // The shared store (SimOptions::shared_store): blocks it stored, and deleted (LRU + TTL).
  std::uint64_t store_stored = 0;
  std::uint64_t store_evicted = 0;
  // Shared-store credit (issue 20, "nothing credited that is gone"), over served requests
  // that were not split: blocks the router credited to the chosen worker from the store
  // beyond its local tiers, and how many of those the engine did not find when it scheduled
  // the request. An upper bound on credit that was gone: a block evicted from the worker's
  // own tiers between the decision and the scheduling counts as missing too.
  std::uint64_t shared_credited_blocks = 0;
  std::uint64_t shared_missing_blocks = 0;
  // The store's leases (SimOptions::store_leases): granted, ended by lease_ttl before their
  // request was scheduled, and new blocks refused because everything held was leased.
  std::uint64_t store_leases = 0;
  std::uint64_t store_leases_expired = 0;
  std::uint64_t store_refused_full = 0;
};

class Simulator {
 public:
  Simulator(SimOptions options, std::unique_ptr<Workload> workload);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Runs to completion. Errors: an unusable fleet or policy, a scheduling error.
  std::expected<SimResult, std::string> Run();

  // For tests (valid during on_step_end and after Run): the engine of a live worker, the index.
  const engine::Engine* engine(WorkerId worker) const;
  const kv::KvIndex& index() const;
  // The router state (load, learned rates, health, scrapes): kvroute serve's own.
  const fleet::RouterState& router_state() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvroute::simulate
