#include "fleet/load_tracker.h"

#include <algorithm>
#include <cmath>

#include "fleet/rate_learner.h"

namespace kvroute::fleet {
namespace {

template <typename T>
void SubClamped(T& v, T d) {
  v = v >= d ? v - d : T{0};
}

// A request's lower-tier bytes leave its worker's backlog.
void DropTierLoads(const std::array<std::uint64_t, kNumTiers>& bytes, WorkerLoad* w) {
  for (int t = 0; t < kNumTiers; ++t) SubClamped(w->pending_tier_load_bytes[t], bytes[t]);
}

// A usable prediction: finite, the wait part within the whole.
bool HasPrediction(const RoutedRequest& r) {
  return r.predicted_ttft_s && r.predicted_wait_s && std::isfinite(*r.predicted_ttft_s) &&
         std::isfinite(*r.predicted_wait_s) && *r.predicted_wait_s >= 0 &&
         *r.predicted_ttft_s >= *r.predicted_wait_s && std::isfinite(r.wait_correction) &&
         r.wait_correction > 0;
}

// The prediction's own part: this request's prefill and tier loads.
double OwnPart(const RoutedRequest& r) { return *r.predicted_ttft_s - *r.predicted_wait_s; }

// The softening of a wait ratio (header): 50 ms, or 10 % of the request's own work.
double Epsilon(double own_s) { return std::max(0.05, 0.1 * own_s); }

}  // namespace

LoadTracker::LoadTracker(RateLearner* learner) : learner_(learner) {}

bool LoadTracker::OnRouted(RequestId id, const RoutedRequest& request, Nanos now) {
  std::lock_guard lock(mu_);
  if (requests_.contains(id)) return false;
  Booked& booked = workers_[request.worker];
  ++booked.version;
  WorkerLoad& w = booked.load;
  Request r;
  r.routed = request;
  r.routed.uncached_tokens = std::min(request.uncached_tokens, request.prompt_tokens);
  r.routed_at = now;
  r.queued_ahead_tokens = PendingLocked(request.worker, booked, now);
  r.booked_ahead_tokens = w.pending_prefill_tokens;
  // The queue's work on the prefill curve, drained in the same proportion as its tokens.
  if (w.pending_prefill_tokens > 0) {
    r.queued_ahead_work = booked.pending_prefill_work *
                          static_cast<double>(r.queued_ahead_tokens) /
                          static_cast<double>(w.pending_prefill_tokens);
  }
  if (w.pending_prefill_tokens == 0) booked.prefill_since = now;
  const auto own = static_cast<double>(r.routed.uncached_tokens);
  const double cached = static_cast<double>(r.routed.prompt_tokens) - own;
  r.work = own;
  if (learner_ != nullptr) {
    if (auto work = learner_->PrefillWork(request.worker, own, cached)) r.work = *work;
  }
  booked.pending_prefill_work += r.work;
  for (int t = 0; t < kNumTiers; ++t) {
    const double bytes = request.tier_load_bytes[t];
    r.tier_load_bytes[t] = std::isfinite(bytes) && bytes > 0 ? std::llround(bytes) : 0;
    w.pending_tier_load_bytes[t] += r.tier_load_bytes[t];
  }
  w.inflight_requests += 1;
  w.pending_prefill_tokens += r.routed.uncached_tokens;
  w.active_kv_blocks += request.kv_blocks;
  if (HasPrediction(request)) calibration_[request.worker].waiting.emplace(now, id);
  requests_.emplace(id, r);
  return true;
}

void LoadTracker::StopWaitingLocked(const Request& r, RequestId id) {
  if (!HasPrediction(r.routed)) return;
  auto it = calibration_.find(r.routed.worker);
  if (it != calibration_.end()) it->second.waiting.erase({r.routed_at, id});
}

void LoadTracker::CalibrateLocked(const Request& r, Nanos now) {
  if (!HasPrediction(r.routed) || now < r.routed_at) return;
  Calibrated& c = calibration_[r.routed.worker];
  const double measured = ToSeconds(now - r.routed_at);
  const double predicted = *r.routed.predicted_ttft_s;
  const double own = OwnPart(r.routed);
  const double e = Epsilon(own);
  const double measured_wait = std::max(0.0, measured - own);
  const double predicted_wait = *r.routed.predicted_wait_s;
  // The factor scales the predicted wait, so only a sample that predicted one can tell it
  // anything: raising it for a wait the model put at zero changes no prediction of that kind
  // and winds it up for every other (an own-prefill error read as queueing). A wait the
  // model misses entirely is the overdue bound's (WaitCorrectionLocked).
  if (predicted_wait >= e) {
    const double step = kCalibrationGain * std::log((measured_wait + e) / (predicted_wait + e));
    c.log_correction = std::clamp(c.log_correction + step, std::log(kMinWaitCorrection),
                                  std::log(kMaxWaitCorrection));
  }
  const double drift = std::log(std::max(measured, 1e-6) / std::max(predicted, 1e-6));
  c.log_drift = c.samples == 0 ? drift : 0.95 * c.log_drift + 0.05 * drift;
  ++c.samples;
}

double LoadTracker::WaitCorrection(WorkerId worker, Nanos now) const {
  std::lock_guard lock(mu_);
  return WaitCorrectionLocked(worker, now);
}

LoadTracker::View LoadTracker::ViewOf(WorkerId worker, Nanos now) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return {0, WaitCorrectionLocked(worker, now), 0};
  return {it->second.version, WaitCorrectionLocked(worker, now),
          PendingLocked(worker, it->second, now)};
}

std::uint64_t LoadTracker::PendingPrefillTokens(WorkerId worker, Nanos now) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  return it == workers_.end() ? 0 : PendingLocked(worker, it->second, now);
}

std::uint64_t LoadTracker::PendingLocked(WorkerId worker, const Booked& booked, Nanos now) const {
  const std::uint64_t booked_tokens = booked.load.pending_prefill_tokens;
  if (booked_tokens == 0 || learner_ == nullptr || now <= booked.prefill_since) return booked_tokens;
  const std::optional<RateEstimate> rate = learner_->Estimate(worker);
  if (!rate || !std::isfinite(rate->prefill_tokens_per_s) || !(rate->prefill_tokens_per_s > 0)) {
    return booked_tokens;
  }
  const double elapsed = ToSeconds(now - booked.prefill_since);
  // The queue drains on the prefill curve: its work (each request's own, with the cached
  // prefix its tokens attend to) at c1 seconds per unit; the tokens still ahead are the
  // booked ones in the proportion of work left. A follow-up turn's 3k tokens behind a 35k
  // history take longer than their reference-rate time, and draining tokens at that rate
  // read Infera's prefill queue as empty while its legs still waited.
  if (booked.pending_prefill_work > 0 && std::isfinite(rate->prefill_s_per_token) &&
      rate->prefill_s_per_token > 0) {
    const double left = 1 - elapsed / (rate->prefill_s_per_token * booked.pending_prefill_work);
    if (!(left > 0)) return 0;
    return std::min(booked_tokens,
                    static_cast<std::uint64_t>(static_cast<double>(booked_tokens) * left));
  }
  const double done = rate->prefill_tokens_per_s * elapsed;
  if (done >= static_cast<double>(booked_tokens)) return 0;
  return booked_tokens - static_cast<std::uint64_t>(done);
}

double LoadTracker::WaitCorrectionLocked(WorkerId worker, Nanos now) const {
  auto it = calibration_.find(worker);
  if (it == calibration_.end()) return 1;
  const Calibrated& c = it->second;
  double factor = std::exp(c.log_correction);
  if (!c.waiting.empty()) {
    const auto& [routed_at, id] = *c.waiting.begin();
    auto rit = requests_.find(id);
    if (rit != requests_.end() && now > routed_at) {
      const RoutedRequest& rr = rit->second.routed;
      const double own = OwnPart(rr);
      const double e = Epsilon(own);
      const double waited = ToSeconds(now - routed_at) - own;
      const double overdue = (waited + e) / (*rr.predicted_wait_s + e);
      if (overdue > 1) factor = std::max(factor, rr.wait_correction * overdue);
    }
  }
  return std::clamp(factor, kMinWaitCorrection, kMaxWaitCorrection);
}

TtftCalibration LoadTracker::Calibration(WorkerId worker) const {
  std::lock_guard lock(mu_);
  auto it = calibration_.find(worker);
  if (it == calibration_.end()) return {};
  return {std::exp(it->second.log_correction), std::exp(it->second.log_drift), it->second.samples};
}

std::optional<WorkerId> LoadTracker::OnFirstToken(RequestId id, Nanos now,
                                                  FirstTokenObservation* observed) {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.first_token_seen) {
    ++stale_calls_;
    return std::nullopt;
  }
  Request& r = it->second;
  Booked& booked = workers_[r.routed.worker];
  ++booked.version;
  WorkerLoad& w = booked.load;
  r.first_token_seen = true;
  r.last_token_at = now;
  r.generated = 1;
  StopWaitingLocked(r, id);
  CalibrateLocked(r, now);
  SubClamped(w.pending_prefill_tokens, r.routed.uncached_tokens);
  DropTierLoads(r.tier_load_bytes, &w);
  booked.DropWork(r.work);
  booked.prefill_since = now;
  w.decoding_requests += 1;
  w.active_kv_tokens += r.routed.prompt_tokens + 1;
  // Work the worker had to do before this request's first token: its own uncached tokens
  // (on the prefill curve, with the cached prefix they attend to) plus the work queued ahead
  // of it (each of those requests on the curve: several prompts, not one;
  // RateLearner::ObservePrefill). A request fully served from cache still prefills one token
  // (vLLM recomputes the last prompt token).
  const auto own = static_cast<double>(r.routed.uncached_tokens);
  const double cached = static_cast<double>(r.routed.prompt_tokens) - own;
  if (learner_ != nullptr && r.routed.observe_prefill && now >= r.routed_at) {
    learner_->ObservePrefill(r.routed.worker, std::max(own, 1.0), now - r.routed_at,
                             own * std::max(0.0, cached), r.queued_ahead_work);
  }
  if (observed != nullptr) {
    observed->routed = r.routed;
    observed->ttft_s = now >= r.routed_at ? ToSeconds(now - r.routed_at) : 0;
    observed->queued_ahead_tokens = r.queued_ahead_tokens;
    observed->booked_ahead_tokens = r.booked_ahead_tokens;
  }
  return r.routed.worker;
}

void LoadTracker::OnToken(RequestId id, Nanos now, std::uint32_t tokens) {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end() || !it->second.first_token_seen || tokens == 0) {
    ++stale_calls_;
    return;
  }
  Request& r = it->second;
  Booked& booked = workers_[r.routed.worker];
  ++booked.version;
  WorkerLoad& w = booked.load;
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

std::optional<WorkerId> LoadTracker::OnDone(RequestId id, Nanos /*now*/, bool /*ok*/) {
  std::lock_guard lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    ++stale_calls_;
    return std::nullopt;
  }
  const WorkerId worker = it->second.routed.worker;
  DropLocked(it);
  return worker;
}

void LoadTracker::DropLocked(std::unordered_map<RequestId, Request>::iterator it) {
  const Request& r = it->second;
  if (!r.first_token_seen) StopWaitingLocked(r, it->first);
  auto wit = workers_.find(r.routed.worker);
  if (wit != workers_.end()) {
    ++wit->second.version;
    WorkerLoad& w = wit->second.load;
    SubClamped(w.inflight_requests, 1u);
    SubClamped(w.active_kv_blocks, r.routed.kv_blocks);
    if (r.first_token_seen) {
      SubClamped(w.decoding_requests, 1u);
      SubClamped(w.active_kv_tokens, r.routed.prompt_tokens + r.generated);
    } else {
      SubClamped(w.pending_prefill_tokens, r.routed.uncached_tokens);
      DropTierLoads(r.tier_load_bytes, &w);
      wit->second.DropWork(r.work);
    }
    if (w.inflight_requests == 0) {  // exact zero, no drift kept
      w = WorkerLoad{};
      wit->second.pending_prefill_work = 0;
    }
  }
  requests_.erase(it);
}

WorkerLoad LoadTracker::Load(WorkerId worker) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  return it == workers_.end() ? WorkerLoad{} : it->second.load;
}

void LoadTracker::ForgetWorker(WorkerId worker) {
  std::lock_guard lock(mu_);
  std::erase_if(requests_, [&](const auto& kv) { return kv.second.routed.worker == worker; });
  if (auto it = workers_.find(worker); it != workers_.end()) {
    it->second.load = WorkerLoad{};
    it->second.pending_prefill_work = 0;
    ++it->second.version;
  }
  // The learned correction stays (as the learner's rates do); the waiting list is gone.
  if (auto it = calibration_.find(worker); it != calibration_.end()) it->second.waiting.clear();
}

std::size_t LoadTracker::inflight() const {
  std::lock_guard lock(mu_);
  return requests_.size();
}

std::uint64_t LoadTracker::stale_calls() const {
  std::lock_guard lock(mu_);
  return stale_calls_;
}

}  // namespace kvroute::fleet
