// Scheduler, async lower-tier loads (EngineConfig::async_tier_loads): a request whose prefix
// is partly in host memory, on disk or in the shared store waits aside while its blocks are
// copied into GPU memory, instead of making the whole batch's step wait; and the shared
// store's leases, which keep a queued request's credited store blocks from being evicted
// before it is scheduled. See scheduler.h.
#include <algorithm>

#include "engine/scheduler.h"

namespace kvroute::engine {

void Scheduler::StartTierLoad(Request* req, const std::array<double, kNumTiers>& bytes,
                              Nanos now) {
  // Each tier's path serves its loads one after another (a shared link, not an infinitely
  // parallel one); the paths of different tiers run at the same time, so the request is
  // ready when its slowest tier is done.
  Nanos ready = now;
  double transfer_s = 0;
  for (int t = 1; t < kNumTiers; ++t) {
    const double s = TierLoadSeconds(t, bytes[t]);
    if (s <= 0) continue;
    const Nanos start = std::max(now, tier_path_free_at_[t]);
    tier_path_free_at_[t] = start + FromSeconds(s);
    if (tier_path_free_at_[t] > ready) {
      ready = tier_path_free_at_[t];
      transfer_s = s;  // the tier that finishes last sets both parts
    }
  }
  req->tier_transfer_s = transfer_s;
  req->tier_path_queue_s = std::max(0.0, ToSeconds(ready - now) - transfer_s);
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

void Scheduler::LeaseStoreRun(Request* req, Nanos now) {
  // The whole prefix a hit could use, up to one token short of the prompt: not only the run
  // beyond the local tiers, since a local block may be evicted while the request waits and
  // the hit then continues from the store at that block.
  const std::size_t max_blocks =
      std::min({req->keys.size(), req->hashes.size(),
                static_cast<std::size_t>((req->num_tokens() - 1) / config_.block_size)});
  if (max_blocks == 0) return;
  req->store_lease = config_.shared.store->Lease(
      std::span<const kv::EngineHash>(req->hashes).first(max_blocks), now);
  req->store_lease_at = now;
}

void Scheduler::LeaseArrivals(Nanos now) {
  for (const std::string& id : to_lease_) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;  // aborted before its first step
    Request* req = it->second.get();
    // Committed in this step (running, loading, or a decode leg pulling): blocks allocated.
    if (req->running || !req->blocks.empty() || req->store_lease != 0) continue;
    LeaseStoreRun(req, now);
  }
  to_lease_.clear();
}

void Scheduler::RenewStoreLeases(Nanos now) {
  const Nanos every = config_.shared.lease_renew_every;
  if (every <= Nanos(0)) return;
  for (Request* req : waiting_) {
    if (req->store_lease == 0 || now - req->store_lease_at < every) continue;
    // The new lease first, so the blocks are never without one; a block the store lost
    // meanwhile (the old lease ended by its TTL) is simply not in the new one.
    const std::uint64_t old = req->store_lease;
    LeaseStoreRun(req, now);
    config_.shared.store->Release(old, now);
  }
}

void Scheduler::ReleaseStoreLease(Request* req, Nanos now) {
  if (req->store_lease == 0) return;
  config_.shared.store->Release(req->store_lease, now);
  req->store_lease = 0;
}

}  // namespace kvroute::engine
