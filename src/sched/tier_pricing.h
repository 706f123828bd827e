// Tier pricing (issue 20): what each cached prefix block costs to bring into GPU memory from
// the tier that holds it, against recomputing it, per worker — and the fixed-weight presets
// other routers use instead, beside it for comparison.
//
//   MergeSharedTier   the cluster store's SHARED depth (the index holds it once, under the
//                     store's own id) becomes every serving worker's SHARED depth (at least:
//                     a worker's own SHARED depth already counts its local tiers, as every
//                     depth counts the faster tiers): a shared block costs the same
//                     everywhere, a host or disk block only on its holder.
//   PriceTiers        per tier: blocks, load seconds (blocks × kv_bytes_per_block / the
//                     worker's bandwidth for that tier), and the recompute seconds of the same
//                     blocks (PrefillSeconds at their position in the prompt). GPU costs 0.
//                     PredictTtft (latency_model.h) charges the same load seconds; this breaks
//                     them out so a decision, a test or a report can say why a tier won.
//   TierWeights       credit per tier as fixed fractions of a GPU hit: Dynamo KVBM's
//                     (host 0.75, disk 0.25, shared 0.5) and llm-d's (GPU 1.0, CPU 0.8).
//                     WeightedHitBlocks is what such a router credits a worker with: each
//                     block of the prefix at its fastest tier (LayerHits), as llm-d scores
//                     "each consecutive block weighted by the best medium holding it".
//
// Pure functions. Thread safety: none needed.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <vector>

#include "sched/types.h"

namespace kvroute::sched {

// The cache view's worker id the router gives the shared store's events (never a real worker:
// fleet::RouterState numbers workers from 0 upward).
inline constexpr WorkerId kSharedStoreWorker = 0xFFFFFFF0u;

// Removes the view of kSharedStoreWorker from *views (if any) and gives every worker in
// `workers` that SHARED depth (its own views keep their local tiers; a worker without a view
// gets one); the views end up sorted by worker. The "any" depth becomes at least the shared
// depth. Without a store view (or with depth 0) *views is left as it was.
void MergeSharedTier(std::span<const WorkerSnapshot> workers, std::vector<CacheView>* views);

struct TierPrice {
  std::array<std::uint32_t, kNumTiers> blocks{};   // prefix blocks read from each tier
  std::array<double, kNumTiers> load_s{};          // seconds to load them (GPU: 0)
  std::array<double, kNumTiers> recompute_s{};     // seconds to prefill the same blocks instead
  double load_wait_s() const;  // the slowest tier's load: tiers load in parallel
  double total_recompute_s() const;
};
// Error when the worker has no usable prefill rate (PrefillSeconds's message).
std::expected<TierPrice, std::string> PriceTiers(const RequestProfile& request,
                                                 const CacheView& view,
                                                 const WorkerSnapshot& worker);

struct TierWeights {
  std::array<double, kNumTiers> weight{1, 0, 0, 0};  // credit per block, by tier
};
// Dynamo KVBM (G1 GPU, G2 host, G3 disk, G4 shared): overlap credit 1 / 0.75 / 0.25 / 0.5
// (router-anchors.md; the shared weight with --shared-cache-type hicache).
inline constexpr TierWeights kDynamoKvbmWeights{{1.0, 0.75, 0.25, 0.5}};
// llm-d precise prefix-cache scorer: GPU 1.0, CPU 0.8 (router-anchors.md); other tiers are
// not credited.
inline constexpr TierWeights kLlmdTierWeights{{1.0, 0.8, 0.0, 0.0}};

// Σ over tiers of (blocks credited at that tier, fastest first: LayerHits) × weight, in
// blocks; mixed blocks are credited at the smallest non-zero lower-tier weight.
double WeightedHitBlocks(const CacheView& view, std::uint32_t num_full_blocks,
                         const TierWeights& weights);

}  // namespace kvroute::sched
