// Built-in filters (contract in plugin.h). Each is immutable after construction.
//
//   healthy         drops workers marked unhealthy
//   not_draining    drops draining workers
//   model           drops workers that do not serve the request's model (and LoRA adapter)
//   role            keeps workers whose role is one of a set (P/D split later)
//   prefix_affinity llm-d's "sticky until saturated": keeps workers whose prefix hit ratio
//                   is >= threshold, unless that worker's look-ahead pending uncached prefill
//                   exceeds tau = prefill_tokens_per_s * max_ttft_penalty_s, or (derived
//                   tau) unless its predicted TTFT exceeds another worker's by more than the
//                   recompute the holder saves
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

#include "sched/latency_model.h"
#include "sched/plugin.h"

namespace kvroute::sched {

std::shared_ptr<const Filter> NewHealthyFilter();
std::shared_ptr<const Filter> NewNotDrainingFilter();
std::shared_ptr<const Filter> NewModelFilter();
std::shared_ptr<const Filter> NewRoleFilter(std::vector<Role> allowed);

struct PrefixAffinityOptions {
  // Minimum fraction of the prompt's full blocks held (any tier) to be sticky. llm-d: 0.80.
  double threshold = 0.80;
  // Fixed bound (llm-d's): the longest extra TTFT (seconds) the sticky worker's backlog may
  // impose before stickiness breaks; tau = the worker's learned prefill_tokens_per_s * this.
  // llm-d's blog: 14 s.
  double max_ttft_penalty_s = 14.0;
  // Derived bound (kvroute's default): the deepest holder h stays sticky while, for every
  // idle candidate o (nothing routed there in flight),
  //   TTFT(h) <= TTFT(o) + max(0, prefill_o(uncached(o)) - prefill_o(uncached(h)))
  // (prefill_o: PrefillSeconds at o's learned curve, latency_model.h)
  // i.e. keeping the conversation costs this request no more TTFT than the recompute it
  // saves the cluster (the prefix o would have to prefill again). TTFT is the full predicted
  // model (queue, prefill, tier loads, decode interference, KV wait, the worker's wait
  // correction), so the bound moves with the learned rates and the measured queueing: no
  // constant to calibrate. Busy workers do not break stickiness: moving a conversation to
  // one adds its recompute to a queue that others wait in too (letting busy workers end it
  // lost cached fraction and TTFT p99 on the conversation trace and SLO attainment on
  // Mooncake, 0.41-0.44 against 0.55: docs/bench/policy-matrix.md). This is the work-conservation rule: an idle
  // worker is never passed over for a holder whose predicted TTFT exceeds the idle one's by
  // more than the prefix it saves. Holders that break it are dropped with the numbers as
  // the reason and the next deepest is tried; shallower holders (a shared system prompt's,
  // when a conversation's holder is viable) and non-holders are dropped.
  bool derived_tau = false;
  // Which workers may end stickiness under the derived bound: kIdle, nothing in flight; or
  // kNoPrefillQueue, no routed prefill waiting for its first token (it may be decoding: a
  // chunked-prefill engine starts the prompt at its next step, beside the running batch).
  enum class Rivals { kIdle, kNoPrefillQueue };
  Rivals rivals = Rivals::kIdle;
  TtftTerms terms = kFullTtftModel;  // the model the derived bound predicts with
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

class Registry;
// Adds the built-in filters with their YAML options to `registry` (Registry::Builtin).
void RegisterBuiltinFilters(Registry& registry);

}  // namespace kvroute::sched
