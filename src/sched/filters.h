// Built-in filters (contract in plugin.h). Each is immutable after construction.
//
//   healthy         drops workers marked unhealthy
//   not_draining    drops draining workers
//   model           drops workers that do not serve the request's model (and LoRA adapter)
//   role            keeps workers whose role is one of a set (P/D split later)
//   prefix_affinity llm-d's "sticky until saturated": keeps workers whose prefix hit ratio
//                   is >= threshold, unless that worker's look-ahead pending uncached prefill
//                   exceeds tau = prefill_tokens_per_s * max_ttft_penalty_s
//   itl_guard       drops workers whose predicted ITL with this request exceeds the ITL SLO,
//                   except the conversation's holder within a bounded factor of it
//
// prefix_affinity and itl_guard are meant to be soft (policy: if_all_dropped: keep_all):
// when nobody qualifies, the request goes on with everyone.
//
// Thread safety: const methods only; share freely.
#pragma once

#include <memory>
#include <vector>

#include "sched/plugin.h"

namespace kvroute::sched {

std::shared_ptr<const Filter> NewHealthyFilter();
std::shared_ptr<const Filter> NewNotDrainingFilter();
std::shared_ptr<const Filter> NewModelFilter();
std::shared_ptr<const Filter> NewRoleFilter(std::vector<Role> allowed);

struct PrefixAffinityOptions {
  // Minimum fraction of the prompt's full blocks held (any tier) to be sticky. llm-d: 0.80.
  double threshold = 0.80;
  // Longest extra TTFT (seconds) the sticky worker's backlog may impose before stickiness
  // breaks; tau = the worker's learned prefill_tokens_per_s * this. llm-d's blog: 14 s.
  double max_ttft_penalty_s = 14.0;
};
std::shared_ptr<const Filter> NewPrefixAffinityFilter(const PrefixAffinityOptions& options);

struct ItlGuardOptions {
  // Inter-token latency SLO, seconds; RequestProfile::itl_slo_s overrides it. An operator
  // target, not a calibration constant.
  double itl_slo_s = 0.1;
  // The worker holding the conversation (prefix hit ratio >= holder_threshold) is kept while
  // its predicted ITL stays within holder_max_itl_factor x the SLO: moving a long session
  // re-prefills its whole context elsewhere (~4 s for 75k tokens at 17k tokens/s) and evicts
  // another session there, which costs more than a somewhat slower ITL. 1.25: at a 33 ms
  // per-user target the holder keeps its session up to ~41 ms, about where Infera's sweep
  // stop rule (mean ITL 40 ms) ends a run. threshold > 1: no exemption.
  double holder_threshold = 0.90;
  double holder_max_itl_factor = 1.25;
};
std::shared_ptr<const Filter> NewItlGuardFilter(const ItlGuardOptions& options);

}  // namespace kvroute::sched
