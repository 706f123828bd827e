// Scheduler, async lower-tier loads (EngineConfig::async_tier_loads): a request whose prefix
// is partly in host memory, on disk or in the shared store waits aside while its blocks are
// copied into GPU memory, instead of making the whole batch's step wait. See scheduler.h.
#include <algorithm>

#include "engine/scheduler.h"

namespace kvroute::engine {

void Scheduler::StartTierLoad(Request* req, const std::array<double, kNumTiers>& bytes,
                              Nanos now) {
  // Each tier's path serves its loads one after another (a shared link, not an infinitely
  // parallel one); the paths of different tiers run at the same time, so the request is
  // ready when its slowest tier is done.
  Nanos ready = now;
  for (int t = 1; t < kNumTiers; ++t) {
    const double s = TierLoadSeconds(t, bytes[t]);
    if (s <= 0) continue;
    const Nanos start = std::max(now, tier_path_free_at_[t]);
    tier_path_free_at_[t] = start + FromSeconds(s);
    ready = std::max(ready, tier_path_free_at_[t]);
  }
  req->tier_loading = true;
  req->tier_ready = ready;
  tier_loading_.push_back(req);
}

void Scheduler::TakeLoadedTiers(Nanos now) {
  if (tier_loading_.empty()) return;
  std::vector<Request*> done;
  for (Request* req : tier_loading_) {
    if (req->tier_ready <= now) done.push_back(req);
  }
  if (done.empty()) return;
  std::erase_if(tier_loading_, [now](const Request* r) { return r->tier_ready <= now; });
  // Oldest load first; ties in arrival order (the vector's order) for determinism.
  std::stable_sort(done.begin(), done.end(),
                   [](const Request* a, const Request* b) { return a->tier_ready < b->tier_ready; });
  for (auto it = done.rbegin(); it != done.rend(); ++it) {
    Request* req = *it;
    // Its blocks are on GPU and cached now; handing them back to the free queue (at its
    // most-recently-used end) and rescheduling the request from the front of the waiting
    // queue finds them as GPU hits in this step, as vLLM resumes a request whose remote KV
    // arrived.
    FreeBlocks(req);
    req->tier_loading = false;
    req->tier_loaded = true;
    waiting_.push_front(req);
  }
}

}  // namespace kvroute::engine
