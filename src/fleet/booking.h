// Booking a decision: what the chosen worker must prefill and hold for a request, computed
// once from the request profile and the policy's decision, by the one rule both `kvroute
// serve` (gateway/request_pipeline.cc) and `kvroute simulate` use:
//   cached     the deepest prefix the decision saw on that worker in any tier (each tier's
//              depth and the "any" depth, clamped to the prompt's full blocks)
//   uncached   prompt − cached × block size: what the worker prefills (it loads the rest)
//   kv blocks  ⌈(prompt + predicted output) / block size⌉: what it holds until done
//   predicted  the chosen worker's predicted TTFT and its queue-dependent part, with the
//              wait correction the decision saw, for the tracker's calibration
//   tiers      the cached prefix per tier and the prompt's full blocks, from which
//              RouterState::Book prices the lower-tier loads for the tier learner
//
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstdint>

#include "common/tier.h"
#include "common/types.h"
#include "fleet/load_tracker.h"
#include "sched/decision.h"
#include "sched/types.h"

namespace kvroute::fleet {

// The chosen worker's cached prefix as the decision saw it, in blocks.
struct CachedPrefix {
  std::array<std::uint32_t, kNumTiers> blocks{};  // per tier (CacheView::depth_blocks)
  std::uint32_t any_blocks = 0;  // deepest in any tier, clamped to the full blocks
};

// Zero for a worker without a cache view in `profile`.
CachedPrefix CachedPrefixOn(const sched::RequestProfile& profile, WorkerId worker);

// The booking of `worker` for `profile`. `decision` (may be null: a fallback chose) supplies
// the prediction when it has a trace for the worker; `wait_correction` is the worker's
// snapshot's (what the prediction was made with).
RoutedRequest BookingFor(const sched::RequestProfile& profile, const CachedPrefix& cached,
                         WorkerId worker, const sched::Decision* decision,
                         double wait_correction);

}  // namespace kvroute::fleet
