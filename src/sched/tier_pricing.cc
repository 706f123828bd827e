#include "sched/tier_pricing.h"

#include <algorithm>

#include "sched/latency_model.h"

namespace kvroute::sched {

void MergeSharedTier(std::span<const WorkerSnapshot> workers, std::vector<CacheView>* views) {
  constexpr int kShared = static_cast<int>(Tier::kShared);
  std::uint32_t shared = 0;
  for (auto it = views->begin(); it != views->end(); ++it) {
    if (it->worker != kSharedStoreWorker) continue;
    shared = std::max(it->depth_blocks[kShared], it->any_depth_blocks);
    views->erase(it);
    break;
  }
  if (shared == 0) return;
  for (const WorkerSnapshot& w : workers) {
    auto v = std::find_if(views->begin(), views->end(),
                          [&](const CacheView& c) { return c.worker == w.id; });
    if (v == views->end()) {
      CacheView c;
      c.worker = w.id;
      views->push_back(c);
      v = std::prev(views->end());
    }
    v->depth_blocks[kShared] = std::max(v->depth_blocks[kShared], shared);
    v->any_depth_blocks = std::max(v->any_depth_blocks, shared);
  }
  // Views in worker order, as the index and the simulator give them (Decide's merge walk).
  std::ranges::sort(*views, {}, &CacheView::worker);
}

double TierPrice::load_wait_s() const {
  double s = 0;
  for (double x : load_s) s = std::max(s, x);  // tiers load in parallel (PlanLoad)
  return s;
}

double TierPrice::total_recompute_s() const {
  double s = 0;
  for (double x : recompute_s) s += x;
  return s;
}

std::expected<TierPrice, std::string> PriceTiers(const RequestProfile& request,
                                                 const CacheView& view,
                                                 const WorkerSnapshot& worker) {
  const LoadPlan plan = PlanLoad(request, view, worker);
  TierPrice price;
  std::uint64_t before = 0;  // tokens of the prefix ahead of this tier's blocks
  for (int t = 0; t < kNumTiers; ++t) {
    price.blocks[t] = plan.load_blocks[t];
    const std::uint64_t tokens = std::uint64_t{plan.load_blocks[t]} * request.block_size;
    if (t != static_cast<int>(Tier::kGpu) && plan.load_blocks[t] > 0) {
      price.load_s[t] = plan.load_blocks[t] * *worker.kv_bytes_per_block /
                        *worker.tier_load_bytes_per_s[t];
    }
    // Recomputing these blocks means prefilling them on top of the prefix before them.
    auto recompute = PrefillSeconds(worker, tokens, before);
    if (!recompute) return std::unexpected(recompute.error());
    price.recompute_s[t] = tokens > 0 ? *recompute : 0;
    before += tokens;
  }
  return price;
}

double WeightedHitBlocks(const CacheView& view, std::uint32_t num_full_blocks,
                         const TierWeights& weights) {
  const LayeredHits hits = LayerHits(view, num_full_blocks);
  double credit = 0;
  double mixed_weight = 0;
  for (int t = 0; t < kNumTiers; ++t) {
    credit += hits.blocks[t] * weights.weight[t];
    if (t > 0 && weights.weight[t] > 0 && (mixed_weight == 0 || weights.weight[t] < mixed_weight)) {
      mixed_weight = weights.weight[t];
    }
  }
  return credit + hits.mixed_blocks * mixed_weight;
}

}  // namespace kvroute::sched
