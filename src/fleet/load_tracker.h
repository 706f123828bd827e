// LoadTracker: router-side load accounting per worker — what kvroute itself has routed to a
// worker and not yet seen finish — and the source of the timing observations the
// RateLearner fits.
//
// Per worker it keeps:
//   inflight_requests       +1 on route, -1 on completion
//   pending_prefill_tokens  the uncached prompt tokens of requests whose first token has not
//                           arrived yet (dropped at first token: the prefill is done). What
//                           a decision sees is that less the work done since the last first
//                           token at the learned rate (PendingPrefillTokens, View)
//   active_kv_blocks        blocks the in-flight requests hold (freed at completion)
//   pending_tier_load_bytes the lower-tier bytes of requests whose first token has not
//                           arrived, per tier (dropped at first token). Not drained with
//                           time: a request still queued for KV memory has not started its
//                           load, and one whose load is done holds the path only for its
//                           prefill's length
//   decoding / active_kv_tokens  requests past their first token and the KV tokens they hold
//                           (prompt + tokens generated so far): the batch of an ITL sample
//
// Observations fed to the learner (when one is given):
//   prefill: TTFT (route → first token) against own uncached tokens + the pending prefill
//            tokens still ahead on the worker at route time (drained, as above).
//            Queue-free TTFTs are not observable from the router, so the queue ahead is
//            counted as work, apart from the request's own (RateLearner::ObservePrefill: the
//            queue at the reference rate, as sched::PredictTtft prices it; own tokens on the
//            prefill curve).
//   calibration: each first token's measured TTFT against the policy's prediction for it
//            (RoutedRequest::predicted_*). The queue-dependent part of the prediction (queue,
//            decode interference, KV wait) is what a model of the engine gets wrong under
//            load: preemption, memory-bound queues and batching are not in it. So per worker
//            a wait correction c is learned online in log space,
//              log c <- log c + kCalibrationGain * log((measured_wait + e) / (predicted_wait + e))
//            with measured_wait = TTFT - the prediction's own part (prefill and tier loads),
//            e = max(50 ms, 10 % of that own part) so that a near-zero wait neither explodes
//            nor dominates, and c within [kMinWaitCorrection, kMaxWaitCorrection]; only
//            samples that predicted a wait (>= e) teach c, since c scales nothing else. The
//            prediction already carries c, so each sample corrects the residual (an
//            integral controller): c settles where predicted and measured waits agree.
//            Feedback at first token is late exactly when it matters (a queue of 150 s
//            reports after 150 s), so WaitCorrection also bounds c from below by how overdue
//            the worker's oldest waiting request is: one that was predicted to wait 5 s and
//            has waited 50 s says the worker is at least 10x slower than believed, now.
//   decode:  each OnToken interval divided by the tokens it delivered, against the worker's
//            decoding batch and active KV tokens at that moment. Intervals during which the
//            worker had pending prefill are skipped: that step mixed prefill chunks in and
//            would bias the decode model upwards.
//
// Unknown ids and repeated completions are ignored (counted in stale_calls()). No clock is
// read; callers pass `now` (monotonic). Owned by fleet::RouterState, which both kvroute serve
// and kvroute simulate call; nothing else books load.
//
// Versions: every change to a worker's load or to what it taught the learner (every call
// above that names one of its requests, ForgetWorker) bumps that worker's version, so a
// caller that keeps snapshots (RouterState::Refresh) re-reads only workers that changed.
//
// Ownership: owns its per-request records; the RateLearner is borrowed and must outlive it.
// Thread safety: every method takes one internal mutex (the learner has its own).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "common/tier.h"
#include "common/types.h"

namespace kvroute::fleet {

class RateLearner;

struct RoutedRequest {
  WorkerId worker = 0;
  std::uint64_t prompt_tokens = 0;    // whole prompt (its KV stays while the request runs)
  std::uint64_t uncached_tokens = 0;  // tokens the worker must prefill (<= prompt_tokens)
  std::uint64_t kv_blocks = 0;        // KV blocks the request will hold
  // The policy's prediction for the chosen worker (sched::CandidateTrace), when it made one:
  // the whole TTFT and its queue-dependent part, both with the wait correction the decision
  // saw (`wait_correction`). Requests without one are not calibrated against.
  std::optional<double> predicted_ttft_s;
  std::optional<double> predicted_wait_s;
  double wait_correction = 1;
  // False for a P/D decode leg: its first token waits for the KV pull, not for a prefill, so
  // it must not become a prefill sample (its later tokens still teach the decode model).
  bool observe_prefill = true;
  // Tier loads (issue 20; fleet/booking.h fills the first four, RouterState::Book the rest
  // whenever a prefill loads from a lower tier):
  // the chosen worker's cached prefix per tier as the decision saw it and the request's
  // full blocks and block size; then the bytes each lower tier will load and the predicted
  // load time (sched::PlanLoad at the worker's bandwidths at Book). At the first token they
  // become a tier-load sample (TierLoadLearner). All zero: nothing loads from a lower tier.
  std::array<std::uint32_t, kNumTiers> cached_blocks{};
  std::uint32_t cached_any_blocks = 0;
  std::uint32_t num_full_blocks = 0;
  std::uint32_t block_size = 0;
  std::array<double, kNumTiers> tier_load_bytes{};
  double predicted_load_s = 0;
};

// What a first token showed about its request (LoadTracker::OnFirstToken's optional output):
// the booking, the measured TTFT and the prefill that was queued ahead of it at route —
// `queued_ahead_tokens` as the prefill learner counts it (booked prefill, less what the
// learned rate says is done by now), `booked_ahead_tokens` the booked prefill of requests
// still waiting for their first token (no decay: a request whose lower-tier load is still
// on the path has not started its prefill, however long ago it was routed).
struct FirstTokenObservation {
  RoutedRequest routed;
  double ttft_s = 0;
  std::uint64_t queued_ahead_tokens = 0;
  std::uint64_t booked_ahead_tokens = 0;
};

// TTFT calibration of one worker (LoadTracker::Calibration), for metrics and reports.
struct TtftCalibration {
  double wait_correction = 1;  // the learned factor (without the overdue bound)
  double drift = 1;            // exp(mean log(measured / predicted TTFT)), recent samples
  std::uint64_t samples = 0;   // first tokens compared with a prediction
};

struct WorkerLoad {
  std::uint32_t inflight_requests = 0;
  std::uint64_t pending_prefill_tokens = 0;
  std::uint64_t active_kv_blocks = 0;
  std::uint32_t decoding_requests = 0;  // in flight and past their first token
  std::uint64_t active_kv_tokens = 0;   // KV tokens of the decoding requests
  // Bytes each lower tier loads for the requests whose first token has not arrived
  // (RoutedRequest::tier_load_bytes; GPU: 0): the backlog on the worker's tier paths.
  std::array<std::uint64_t, kNumTiers> pending_tier_load_bytes{};
  bool operator==(const WorkerLoad&) const = default;
};

class LoadTracker {
 public:
  // `learner` may be null (no rate learning).
  explicit LoadTracker(RateLearner* learner = nullptr);

  // Returns false (and changes nothing) if `id` is already in flight.
  bool OnRouted(RequestId id, const RoutedRequest& request, Nanos now);
  // First output token (or first byte of the response body for non-streaming). Returns the
  // request's worker; nullopt for a stale call (unknown id, first token seen already).
  // `observed` (may be null) gets the request's booking and measured TTFT when it returns one.
  std::optional<WorkerId> OnFirstToken(RequestId id, Nanos now,
                                       FirstTokenObservation* observed = nullptr);
  // `tokens` more output tokens arrived (a stream chunk may carry several).
  void OnToken(RequestId id, Nanos now, std::uint32_t tokens = 1);
  // Completion, success or failure; frees everything the request held. Returns the
  // request's worker; nullopt for an unknown id.
  std::optional<WorkerId> OnDone(RequestId id, Nanos now, bool ok);

  WorkerLoad Load(WorkerId worker) const;  // zero for a worker with nothing in flight
  // What a snapshot re-reads at every decision, under one lock: the worker's version (see
  // the header) and WaitCorrection(worker, now).
  struct View {
    std::uint64_t version = 0;
    double wait_correction = 1;
    std::uint64_t pending_prefill_tokens = 0;  // PendingPrefillTokens(worker, now)
  };
  View ViewOf(WorkerId worker, Nanos now) const;
  // The factor for the queue-dependent part of predicted TTFT on `worker` at `now`: the
  // learned correction, raised to what the oldest request still waiting for its first token
  // there implies (see above). 1 for a worker never calibrated and nothing overdue.
  double WaitCorrection(WorkerId worker, Nanos now) const;
  TtftCalibration Calibration(WorkerId worker) const;
  // The prefill work still ahead on `worker` at `now`: the booked pending tokens less what
  // the worker has prefilled since its last first token (or since its queue formed) at the
  // learned rate, on the prefill curve (the pending requests' RateLearner::PrefillWork at
  // c1 seconds per unit; the tokens left are the booked ones in the proportion of work
  // left; a request's new tokens behind a long cached history drain slower than cold ones,
  // and at the reference rate a follow-up turn's queue read empty while it still waited).
  // Chunked prefill works on the queue the whole time, so counting every
  // booked token until its request's first token counts work already done (a queue of
  // three 30k-token prompts, half through the first, is 75k tokens ahead, not 90k).
  std::uint64_t PendingPrefillTokens(WorkerId worker, Nanos now) const;
  // Drops every in-flight record of `worker` (it was removed); their later calls are ignored.
  void ForgetWorker(WorkerId worker);

  std::size_t inflight() const;
  std::uint64_t stale_calls() const;  // calls naming an unknown or finished request

 private:
  struct Request {
    RoutedRequest routed;
    Nanos routed_at{0};
    std::uint64_t queued_ahead_tokens = 0;
    std::uint64_t booked_ahead_tokens = 0;  // FirstTokenObservation
    // Its prefill on the worker's curve (RateLearner::PrefillWork; its uncached tokens
    // without a learner) and that of the queue ahead of it at route (the booked queue's
    // work in the proportion queued_ahead_tokens / booked pending tokens).
    double work = 0;
    double queued_ahead_work = 0;
    std::array<std::uint64_t, kNumTiers> tier_load_bytes{};  // as booked (whole bytes)
    bool first_token_seen = false;
    Nanos last_token_at{0};
    std::uint64_t generated = 0;
  };
  struct Calibrated {  // per worker; survives the worker having nothing in flight
    double log_correction = 0;
    double log_drift = 0;  // EWMA of log(measured / predicted TTFT)
    std::uint64_t samples = 0;
    // Requests with a prediction still waiting for their first token, oldest first.
    std::set<std::pair<Nanos, RequestId>> waiting;
  };
  struct Booked {  // per worker; kept (zeroed) when nothing is in flight, for its version
    WorkerLoad load;
    std::uint64_t version = 0;
    // Since when the pending requests have been worked on: the last first token, or the
    // route that started a queue on an idle prefill.
    Nanos prefill_since{0};
    // The curve work of the pending requests (Request::work summed): the queue-ahead sample.
    double pending_prefill_work = 0;
    void DropWork(double work) {
      pending_prefill_work = load.pending_prefill_tokens == 0
                                 ? 0
                                 : std::max(0.0, pending_prefill_work - work);
    }
  };
  std::uint64_t PendingLocked(WorkerId worker, const Booked& booked, Nanos now) const;
  void DropLocked(std::unordered_map<RequestId, Request>::iterator it);
  void StopWaitingLocked(const Request& r, RequestId id);
  void CalibrateLocked(const Request& r, Nanos now);
  double WaitCorrectionLocked(WorkerId worker, Nanos now) const;

  RateLearner* const learner_;
  mutable std::mutex mu_;
  std::unordered_map<RequestId, Request> requests_;        // guarded by mu_
  std::unordered_map<WorkerId, Booked> workers_;           // guarded by mu_
  std::unordered_map<WorkerId, Calibrated> calibration_;  // guarded by mu_
  std::uint64_t stale_calls_ = 0;                          // guarded by mu_
};

inline constexpr double kCalibrationGain = 0.2;
inline constexpr double kMinWaitCorrection = 1.0 / 16;
inline constexpr double kMaxWaitCorrection = 1000;

// TokenBatcher: one stream's decode tokens, reported to LoadTracker::OnToken once per
// `tokens_per_report` tokens instead of once per relayed piece. Why: at one token per piece
// (a worker streaming token by token) OnToken + RateLearner::ObserveDecode (two locks, two
// hash lookups and an RLS update) cost ~650 instructions per piece, ~20k per 32-token
// request, 3-4 % of the proxy's work per streamed request.
// What changes (load_tracker_test "...WindowsOfFour..." measures it): a decode sample is the
// mean inter-token interval over the window (>= tokens_per_report tokens) against the
// worker's batch and KV tokens at the window's end, instead of one sample per piece; the
// learner gets ~1/N as many samples, each less noisy, so its forgetting memory (~200
// samples) spans ~N times more tokens. The worker's active KV token count lags by at most
// N-1 tokens per stream until the next report or the completion (which frees them anyway).
// `Sink` is anything with OnToken(RequestId, Nanos, std::uint32_t): RouterState (the
// proxy's), or a LoadTracker (its tests).
// Ownership: plain value, one per stream. Thread safety: none (the stream's lane owns it).
class TokenBatcher {
 public:
  static constexpr std::uint32_t kDefaultTokensPerReport = 4;
  explicit TokenBatcher(std::uint32_t tokens_per_report = kDefaultTokensPerReport)
      : per_report_(tokens_per_report == 0 ? 1 : tokens_per_report) {}

  // `tokens` decode tokens (after the first token) arrived at `now`.
  template <typename Sink>
  void Add(Sink& sink, RequestId id, Nanos now, std::uint32_t tokens) {
    pending_ += tokens;
    last_arrival_ = now;
    if (pending_ >= per_report_) Flush(sink, id);
  }
  // Reports what is pending, at the time the last of it arrived (the end of a stream).
  template <typename Sink>
  void Flush(Sink& sink, RequestId id) {
    if (pending_ == 0) return;
    sink.OnToken(id, last_arrival_, pending_);
    pending_ = 0;
  }

 private:
  std::uint32_t per_report_;
  std::uint32_t pending_ = 0;
  Nanos last_arrival_{0};
};

}  // namespace kvroute::fleet
