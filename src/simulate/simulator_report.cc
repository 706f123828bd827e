// Simulator::Impl::ReportCounters: at the end of a run, each worker's engine counters (its
// past lives' included) into the report, the level's hit rates (by tier when a disk tier or a
// store exists) and the store's own counters.
#include <array>

#include "simulate/simulator_impl.h"

namespace kvroute::simulate {

void AddCounters(const engine::EngineStats& from, engine::EngineStats* to) {
  to->prefix_cache_queries += from.prefix_cache_queries;
  to->prefix_cache_hits += from.prefix_cache_hits;
  to->cpu_cache_hits += from.cpu_cache_hits;
  for (int t = 0; t < kNumTiers; ++t) {
    to->tier_hit_tokens[t] += from.tier_hit_tokens[t];
    to->tier_evictions[t] += from.tier_evictions[t];
    to->tier_load_bytes[t] += from.tier_load_bytes[t];
  }
  to->num_preemptions += from.num_preemptions;
  to->prompt_tokens += from.prompt_tokens;
  to->generation_tokens += from.generation_tokens;
}

void Simulator::Impl::ReportCounters() {
  workload::LevelResult& level = result.level;
  level.duration_s = first_arrival.count() < 0 ? 0 : ToSeconds(last_done - first_arrival);
  std::uint64_t queries = 0, hits = 0, cpu_hits = 0;
  std::array<std::uint64_t, kNumTiers> tier_hits{};
  bool any_cpu = false, any_lower = false;
  for (std::size_t w = 0; w < workers.size(); ++w) {
    WorkerState& ws = workers[w];
    WorkerReport rep;
    rep.id = static_cast<WorkerId>(w);
    rep.profile = ws.spec.profile.name;
    rep.role = ws.spec.role;
    rep.alive = ws.alive;
    rep.gpus = static_cast<int>(ws.spec.gpus > 0 ? ws.spec.gpus : ws.spec.profile.hardware.num_gpus);
    rep.routed = ws.routed;
    rep.restarts = ws.restarts;
    rep.stats = ws.alive ? ws.engine->Stats() : engine::EngineStats{};
    engine::EngineStats counters = rep.stats;
    rep.stats.prefix_cache_queries = rep.stats.prefix_cache_hits = rep.stats.cpu_cache_hits = 0;
    rep.stats.num_preemptions = rep.stats.prompt_tokens = rep.stats.generation_tokens = 0;
    rep.stats.tier_hit_tokens = {};
    rep.stats.tier_evictions = {};
    rep.stats.tier_load_bytes = {};
    AddCounters(ws.past, &rep.stats);
    AddCounters(counters, &rep.stats);
    queries += rep.stats.prefix_cache_queries;
    hits += rep.stats.prefix_cache_hits;
    cpu_hits += rep.stats.cpu_cache_hits;
    for (int t = 0; t < kNumTiers; ++t) tier_hits[t] += rep.stats.tier_hit_tokens[t];
    any_cpu = any_cpu || ws.spec.config.num_cpu_blocks > 0;
    any_lower = any_lower || ws.spec.config.disk.num_blocks > 0 || store != nullptr;
    result.workers.push_back(std::move(rep));
  }
  if (queries > 0) {
    level.hit_rate = static_cast<double>(hits) / static_cast<double>(queries);
    if (any_cpu)
      level.external_hit_rate = static_cast<double>(cpu_hits) / static_cast<double>(queries);
    // Hit rate by tier: only with a disk tier or a store, so reports of runs without them
    // keep their old fields (and bytes).
    if (any_lower) {
      level.tier_hit_rate.emplace();
      for (int t = 0; t < kNumTiers; ++t) {
        (*level.tier_hit_rate)[t] = static_cast<double>(tier_hits[t]) / static_cast<double>(queries);
      }
      level.external_hit_rate =
          static_cast<double>(hits - tier_hits[0]) / static_cast<double>(queries);
    }
  }
  if (store) {
    const store::StoreCounters& sc = store->core().counters();
    result.store_stored = sc.stored;
    result.store_evicted = sc.evicted + sc.expired;
    result.store_leases = sc.leases;
    result.store_leases_expired = sc.leases_expired;
    result.store_refused_full = sc.refused_full;
  }
}

}  // namespace kvroute::simulate
