// The one place that turns a cache view and a worker snapshot into predicted work and time:
// which prompt blocks come from which tier, how many tokens must be recomputed, and the
// predicted TTFT and inter-token latency. Filters and scorers call these helpers instead of
// doing their own cached-token arithmetic, so every policy counts hits the same way.
//
// Pure functions of their arguments. Thread safety: none needed.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <string>

#include "sched/types.h"

namespace kvroute::sched {

// The usable prompt prefix split by the tier each block would be read from. Tiers are
// layered fastest first: blocks [0, gpu) from GPU, then the CPU depth beyond that, then
// DISK beyond both, then SHARED beyond all three. Blocks that only the "any" depth covers
// (the prefix alternates between tiers, so no single tier's consecutive depth reaches them)
// are `mixed_blocks`: their tier is unknown.
struct LayeredHits {
  std::array<std::uint32_t, kv::kNumTiers> blocks{};  // per tier, disjoint
  std::uint32_t mixed_blocks = 0;
  std::uint32_t total() const;  // sum of the above
};
// Depths are clamped to the request's num_full_blocks.
LayeredHits LayerHits(const CacheView& view, std::uint32_t num_full_blocks);

// Where each prefix block will actually come from on this worker, for the latency model:
// a lower tier with no known load bandwidth (or no kv_bytes_per_block) cannot be loaded, so
// its blocks are recomputed; mixed blocks are charged at the slowest loadable lower tier
// (an upper bound on their load time), or recomputed if none is loadable.
struct LoadPlan {
  std::array<std::uint32_t, kv::kNumTiers> load_blocks{};  // blocks read from each tier
  std::uint32_t hit_blocks = 0;                            // sum of load_blocks
  std::uint64_t uncached_tokens = 0;                       // prompt tokens to prefill
  double load_s = 0;                                       // seconds moving lower-tier blocks
};
LoadPlan PlanLoad(const RequestProfile& request, const CacheView& view,
                  const WorkerSnapshot& worker);

// Predicted time to first token on this worker, seconds:
//   queue_s   = pending_prefill_tokens / prefill_tokens_per_s   (work routed ahead of us)
//   prefill_s = uncached_tokens / prefill_tokens_per_s          (our own recompute)
//   load_s    = sum over lower tiers of blocks * kv_bytes_per_block / bandwidth
struct TtftPrediction {
  double queue_s = 0;
  double prefill_s = 0;
  double load_s = 0;
  double total_s() const { return queue_s + prefill_s + load_s; }
};
// Error text names the missing input (prefill_tokens_per_s) when the worker has no rate.
std::expected<TtftPrediction, std::string> PredictTtft(const RequestProfile& request,
                                                       const CacheView& view,
                                                       const WorkerSnapshot& worker);

// Predicted decode inter-token latency on this worker if the request is added, seconds:
// decode_step(batch = inflight_requests + 1,
//             kv_tokens = active_kv_blocks * block_size + tokens this request adds on GPU)
// where the request adds its prompt minus the GPU-resident prefix plus its predicted output
// (its size at the end of decoding, the worst step). Error when decode_step is missing.
std::expected<double, std::string> PredictItl(const RequestProfile& request, const CacheView& view,
                                              const WorkerSnapshot& worker);

// Fraction of the prompt's full blocks this worker holds in any tier, in [0, 1]; 0 for a
// prompt shorter than one block.
double PrefixHitRatio(const RequestProfile& request, const CacheView& view);

}  // namespace kvroute::sched
