#include "gateway/load_tracker.h"

#include <algorithm>

#include "gateway/rate_learner.h"

namespace kvroute::gateway {
namespace {

template <typename T>
void SubClamped(T& v, T d) {
  v = v >= d ? v - d : T{0};
}

}  // namespace

LoadTracker::LoadTracker(RateLearner* learner) : learner_(learner) {}

bool LoadTracker::OnRouted(RequestId id, const RoutedRequest& request, Nanos now) {
  std::lock_guard lock(mu_);
  if (requests_.contains(id)) return false;
  WorkerLoad& w = workers_[request.worker];
  Request r;
  r.routed = request;
  r.routed.uncached_tokens = std::min(request.uncached_tokens, request.prompt_tokens);
  r.routed_at = now;
  r.queued_ahead_tokens = w.pending_prefill_tokens;
  w.inflight_requests += 1;
  w.pending_prefill_tokens += r.routed.uncached_tokens;
  w.active_kv_blocks += request.kv_blocks;
  requests_.emplace(id, r);
  return true;
}

void LoadTracker::OnFirstToken(RequestId id, Nanos now) {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.first_token_seen) {
    ++stale_calls_;
    return;
  }
  Request& r = it->second;
  WorkerLoad& w = workers_[r.routed.worker];
  r.first_token_seen = true;
  r.last_token_at = now;
  r.generated = 1;
  SubClamped(w.pending_prefill_tokens, r.routed.uncached_tokens);
  w.decoding_requests += 1;
  w.active_kv_tokens += r.routed.prompt_tokens + 1;
  // Work the worker had to do before this request's first token: its own uncached tokens
  // plus what was queued ahead of it. A request fully served from cache still prefills one
  // token (vLLM recomputes the last prompt token).
  double work = static_cast<double>(r.routed.uncached_tokens + r.queued_ahead_tokens);
  if (learner_ != nullptr && now >= r.routed_at) {
    learner_->ObservePrefill(r.routed.worker, std::max(work, 1.0), now - r.routed_at);
  }
}

void LoadTracker::OnToken(RequestId id, Nanos now, std::uint32_t tokens) {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end() || !it->second.first_token_seen || tokens == 0) {
    ++stale_calls_;
    return;
  }
  Request& r = it->second;
  WorkerLoad& w = workers_[r.routed.worker];
  // The step(s) just observed ran with the batch as it is now, before this chunk's tokens.
  if (learner_ != nullptr && now > r.last_token_at && w.pending_prefill_tokens == 0) {
    Nanos per_token = (now - r.last_token_at) / tokens;
    learner_->ObserveDecode(r.routed.worker, w.decoding_requests,
                            static_cast<double>(w.active_kv_tokens), per_token);
  }
  r.last_token_at = now;
  r.generated += tokens;
  w.active_kv_tokens += tokens;
}

void LoadTracker::OnDone(RequestId id, Nanos /*now*/, bool /*ok*/) {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    ++stale_calls_;
    return;
  }
  DropLocked(it);
}

void LoadTracker::DropLocked(std::unordered_map<RequestId, Request>::iterator it) {
  const Request& r = it->second;
  auto wit = workers_.find(r.routed.worker);
  if (wit != workers_.end()) {
    WorkerLoad& w = wit->second;
    SubClamped(w.inflight_requests, 1u);
    SubClamped(w.active_kv_blocks, r.routed.kv_blocks);
    if (r.first_token_seen) {
      SubClamped(w.decoding_requests, 1u);
      SubClamped(w.active_kv_tokens, r.routed.prompt_tokens + r.generated);
    } else {
      SubClamped(w.pending_prefill_tokens, r.routed.uncached_tokens);
    }
    if (w.inflight_requests == 0) workers_.erase(wit);  // exact zero, no drift kept
  }
  requests_.erase(it);
}

WorkerLoad LoadTracker::Load(WorkerId worker) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  return it == workers_.end() ? WorkerLoad{} : it->second;
}

void LoadTracker::ForgetWorker(WorkerId worker) {
  std::lock_guard lock(mu_);
  std::erase_if(requests_, [&](const auto& kv) { return kv.second.routed.worker == worker; });
  workers_.erase(worker);
}

std::size_t LoadTracker::inflight() const {
  std::lock_guard lock(mu_);
  return requests_.size();
}

std::uint64_t LoadTracker::stale_calls() const {
  std::lock_guard lock(mu_);
  return stale_calls_;
}

}  // namespace kvroute::gateway
