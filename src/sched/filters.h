// Built-in filters (contract in plugin.h). Each is immutable after construction.
//
//   healthy         drops workers marked unhealthy
//   not_draining    drops draining workers
//   model           drops workers that do not serve the request's model (and LoRA adapter)
//   role            keeps workers whose role is one of a set (P/D split later)
//   prefix_affinity llm-d's "sticky until saturated": keeps workers whose prefix hit ratio
//                   is >= threshold, unless that worker's look-ahead pending uncached prefill
//                   exceeds tau = prefill_tokens_per_s * max_ttft_penalty_s
//   itl_guard       drops workers whose predicted ITL with this request exceeds the ITL SLO
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
};
std::shared_ptr<const Filter> NewItlGuardFilter(const ItlGuardOptions& options);

}  // namespace kvroute::sched
