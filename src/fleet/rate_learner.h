// RateLearner: per worker, the rates that decide saturation (DESIGN §5), learned online from
// the timings the gateway observes and seeded from the worker's model x hardware profile, so
// no saturation constant is hand-calibrated.
//
//   prefill:  TTFT_s      ≈ c0 + c1 · (work(u) + Σ_queued work(u_i))
//                                                      (u = the request's own uncached prompt
//                                                       tokens; the sum over the requests
//                                                       queued ahead of it on that worker at
//                                                       route time, each on the curve)
//             work(t) = t + q · t² (+ 2q · u · c: the request's own u uncached tokens
//             attending to its c cached ones),  q = c2 / c1 of the seed, fixed (the profile's attention
//             share: the shape of the prefill curve is a property of the model, only its
//             scale c1 and the overhead c0 are learned)
//             prefill_tokens_per_s = kRateReferenceTokens / (c1 · work(kRateReferenceTokens))
//
// Why the shape is fixed: prefill time grows faster than linearly (attention), and a line
// fitted to a superlinear curve is the secant of the prompt lengths a worker happened to see:
// identical workers fed different prompt mixes learn different rates (a line fed the same
// superlinear physics: 8.1k to 16.6k tokens/s by mix alone). With the curve's shape from the
// profile every mix identifies the same scale. The remaining scatter between identical
// workers is sampling noise (queue, decode interference), handled by ShrinkTowardPeers.
//   decode:   ITL_s       ≈ base + per_seq · batch + per_kv · kv_tokens   (sched::StepTimeModel)
//
// Estimator: recursive least squares with exponential forgetting (factor `forgetting`, an
// effective memory of 1/(1-forgetting) samples), started at the seed with a prior covariance,
// so with few samples the estimate stays near the seed and with many it follows the data.
// Features are normalised by the seed's scale (see rate_learner.cc) to keep RLS well
// conditioned. Robustness: a sample that is not finite or not positive is rejected and
// counted; one longer than `max_sample_s` is clipped to it (a very slow first token under
// overload is real information, "at least this slow": rejecting it, as an earlier version did
// past 600 s, kept an overloaded worker's estimate from ever seeing its overload, issue 15);
// a step that is not a number (a covariance that lost definiteness to rounding, an overflow)
// restarts that estimator from its seed and is counted in `resets`, so every estimate is
// finite and within its bounds whatever the data (rate_learner_test's degenerate streams);
// a residual larger than `outlier_clip` times the
// current prediction is clipped to that bound (Huber-style), so one outlier moves the estimate
// by a bounded amount while a persistent shift still converges. Coefficients are kept >= 0 and
// c1 within [seed/max_drift, seed·max_drift]; a step whose clamping would move the prediction
// at the sample away from it (or past it) is replaced by a step along the sample's features,
// so a coefficient pinned at 0 cannot make the estimate diverge.
//
// Ownership: plain state per worker. Thread safety: every method takes one internal mutex.
// No clock is read: observations carry their own timings (pure, reused by kvroute simulate).
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/types.h"
#include "engine/profile.h"
#include "sched/types.h"

namespace kvroute::fleet {

// The seed of one worker: the prefill line and the decode step model.
struct RateSeed {
  double prefill_overhead_s = 0;      // c0, seconds
  double prefill_s_per_token = 0;     // c1, seconds per uncached token; > 0
  double prefill_s_per_token_sq = 0;  // c2, seconds per token² (attention); >= 0, 0 = a line
  sched::StepTimeModel decode;        // coefficients >= 0, not all 0
};

// Fits a RateSeed to a profile's roofline predictions (engine::StepTimeModel::PrefillTime
// and DecodeStepTime) by least squares over a grid of prompt lengths, batches and contexts.
std::expected<RateSeed, std::string> SeedFromProfile(const engine::Profile& profile);

// Multiplies every time in `seed` by `factor` (1 / speedup for an engine running faster than
// its profile): the prefill line and curve and the decode step model alike.
void ScaleSeedTime(RateSeed& seed, double factor);

struct RateLearnerOptions {
  double forgetting = 0.995;  // RLS forgetting factor in (0, 1]; memory ~200 samples
  double prior_weight = 10;   // how many samples' worth of belief the seed carries
  double outlier_clip = 3.0;  // residual clip, multiples of the current prediction
  double max_sample_s = 3600;  // samples above this (seconds) are clipped to it
  double max_drift = 1000;    // coefficients stay within seed/max_drift .. seed·max_drift
};

// The prompt length at which the exported prefill rate is quoted: one engine chunk
// (vLLM's default max_num_batched_tokens for long-context serving).
inline constexpr double kRateReferenceTokens = sched::kPrefillRateReferenceTokens;

struct RateEstimate {
  double prefill_tokens_per_s = 0;    // at kRateReferenceTokens (1 / c1 when c2 = 0)
  double prefill_overhead_s = 0;      // c0
  double prefill_s_per_token = 0;     // c1
  double prefill_s_per_token_sq = 0;  // c2 = q · c1 (the seed's shape, scaled)
  double attention_q = 0;             // q = c2 / c1: sched::WorkerSnapshot's attention share
  sched::StepTimeModel decode;
  std::uint64_t prefill_samples = 0;   // accepted TTFT samples behind the prefill estimate
  std::uint64_t decode_samples = 0;    // accepted ITL samples behind the decode estimate
  std::uint64_t rejected_samples = 0;  // garbage samples ignored (both kinds)
  std::uint64_t resets = 0;            // estimators restarted from the seed (not a number)
};

// Peer shrinkage of the prefill rate (used by WorkerRegistry::Snapshot and kvroute simulate's
// RouterLoad, the same way): a worker's learned rate is a noisy estimate from its own few
// dozen samples, each mixing queue, decode interference and prompt mix; identical workers'
// estimates scatter up to 1.4x (simulated Mooncake trace, 8 workers: 11.9k..17.1k tokens/s for
// the same physics), and predicted_ttft reads the scatter as real speed differences. So the
// snapshot carries the posterior of a worker's rate with its same-profile peers' pooled rate
// as the prior, worth `prior_samples` samples, combined in log space:
//   log r = (prior_samples · log peer_rate + own_samples · log own_rate) / (prior + own)
// A genuinely different worker overrides the prior as its samples accumulate (2,000 samples
// of a 2x faster worker: 1.93x at prior 100). Returns own_rate if an input is not positive.
double ShrinkTowardPeers(double own_rate, double own_samples, double peer_rate,
                         double prior_samples);

class RateLearner {
 public:
  explicit RateLearner(RateLearnerOptions options = {});
  ~RateLearner();
  RateLearner(const RateLearner&) = delete;
  RateLearner& operator=(const RateLearner&) = delete;

  // (Re)starts a worker's estimate at `seed`, dropping what was learned.
  void Seed(WorkerId worker, const RateSeed& seed);
  void Remove(WorkerId worker);

  // One TTFT observation: the request's own `tokens` uncached prefill tokens, behind
  // `queued_work` of other requests queued ahead of it, took `ttft`. Ignored for an
  // unseeded worker.
  // `context_pairs`: the request's own uncached tokens × the cached prefix they attend to
  // (u·c); attention makes them cost 2q·u·c more than work(tokens) counts
  // (sched::PrefillSeconds uses the same curve).
  // `queued_work`: the queue ahead in the curve's units, the sum of PrefillWork over its
  // requests (LoadTracker keeps it). The queue is several prompts, not one: put through the
  // curve with the request's own tokens, work(own + queued) counted a queue of fifteen
  // 12k-token legs as one 200k-token prompt, with its q·t² attention term, and the learned
  // rate of Infera's prefill engine rose from 97k to 236k tokens/s in one burst of first
  // turns (kvroute simulate, docs/bench/pd-disaggregation.md run D).
  void ObservePrefill(WorkerId worker, double tokens, Nanos ttft, double context_pairs = 0,
                      double queued_work = 0);
  // What one request's prefill weighs on `worker`'s curve: work(uncached) + 2q·uncached·cached
  // (tokens; the time is c1 times it). nullopt for an unseeded worker or a count that is not
  // finite and >= 0.
  std::optional<double> PrefillWork(WorkerId worker, double uncached, double cached) const;
  // One inter-token interval of a decode step with `batch` running sequences holding
  // `kv_tokens` KV tokens in total. Ignored for an unseeded worker.
  void ObserveDecode(WorkerId worker, double batch, double kv_tokens, Nanos itl);

  std::optional<RateEstimate> Estimate(WorkerId worker) const;

 private:
  struct State;  // defined in rate_learner.cc
  RateLearnerOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<WorkerId, std::unique_ptr<State>> workers_;  // guarded by mu_
};

}  // namespace kvroute::fleet
