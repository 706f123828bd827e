#include "fleet/tier_load_learner.h"

#include <algorithm>
#include <cmath>

namespace kvroute::fleet {
namespace {

bool Usable(double x) { return std::isfinite(x) && x > 0; }

}  // namespace

TierLoadLearner::TierLoadLearner(const Bandwidths& seeds, TierLoadLearnerOptions options)
    : options_(options) {
  if (!(options_.max_factor >= 1) || !std::isfinite(options_.max_factor)) options_.max_factor = 1;
  if (!(options_.prior_samples > 0)) options_.prior_samples = 1;
  if (!(options_.forgetting > 0 && options_.forgetting <= 1)) options_.forgetting = 1;
  for (int t = static_cast<int>(Tier::kGpu) + 1; t < kNumTiers; ++t) {
    if (seeds[t] && Usable(*seeds[t])) {
      tiers_[t].seed = *seeds[t];
      tiers_[t].weight = options_.prior_samples;
      tiers_[t].current = *seeds[t];
    }
  }
}

bool TierLoadLearner::Observe(Tier tier, double bytes, double seconds, TierSampleSource source) {
  PerTier& p = tiers_[static_cast<int>(tier)];
  if (tier == Tier::kGpu || !(p.seed > 0) || !Usable(bytes) || !Usable(seconds)) {
    if (tier != Tier::kGpu) ++p.rejected;
    return false;
  }
  // The engine's own load counters are exact; a TTFT residual is an inference.
  if (source == TierSampleSource::kTtft && p.transfer_samples > 0) {
    ++p.rejected;
    return false;
  }
  const double observed = bytes / seconds;
  if (!Usable(observed)) {
    ++p.rejected;
    return false;
  }
  const double bound = std::log(options_.max_factor);
  const double log_ratio = std::clamp(std::log(observed / p.seed), -bound, bound);
  p.weight = options_.forgetting * p.weight + 1;
  p.log_sum = options_.forgetting * p.log_sum + log_ratio;
  ++p.samples;
  if (source == TierSampleSource::kTransfer) ++p.transfer_samples;
  // |log_sum / weight| <= bound by construction (a weighted mean of clipped terms and the
  // prior's zeros); clamped again so rounding can never leave the interval.
  const double v = p.seed * std::exp(std::clamp(p.log_sum / p.weight, -bound, bound));
  p.current = std::clamp(Usable(v) ? v : p.seed, p.seed / options_.max_factor,
                         p.seed * options_.max_factor);
  return true;
}

std::optional<double> TierLoadLearner::bytes_per_s(Tier tier) const {
  const PerTier& p = At(tier);
  if (tier == Tier::kGpu || !(p.seed > 0)) return std::nullopt;
  return p.current;
}

TierLoadLearner::Bandwidths TierLoadLearner::bytes_per_s() const {
  Bandwidths out{};
  for (int t = 0; t < kNumTiers; ++t) out[t] = bytes_per_s(static_cast<Tier>(t));
  return out;
}

std::optional<double> TierLoadLearner::seed(Tier tier) const {
  const PerTier& p = At(tier);
  if (tier == Tier::kGpu || !(p.seed > 0)) return std::nullopt;
  return p.seed;
}

std::optional<TierLoadSample> AttributeTierLoad(const TierLoadObservation& o,
                                                const TierAttributionOptions& options) {
  double total = 0;
  int dominant = -1;
  for (int t = static_cast<int>(Tier::kGpu) + 1; t < kNumTiers; ++t) {
    const double b = o.load_bytes[t];
    if (!std::isfinite(b) || b < 0) return std::nullopt;
    total += b;
    if (b > 0 && (dominant < 0 || b > o.load_bytes[dominant])) dominant = t;
  }
  if (dominant < 0 || !(total > 0)) return std::nullopt;
  if (o.load_bytes[dominant] < options.min_dominant_share * total) return std::nullopt;
  if (o.queued_ahead_tokens > 0) return std::nullopt;
  if (!std::isfinite(o.predicted_ttft_s) || !std::isfinite(o.predicted_wait_s) ||
      !std::isfinite(o.predicted_load_s) || !std::isfinite(o.measured_ttft_s) ||
      o.predicted_wait_s < 0 || o.predicted_load_s < 0 ||
      o.predicted_ttft_s < (o.predicted_wait_s + o.predicted_load_s) * (1 - 1e-9)) {
    // (a prediction clamped at kMaxPredictedSeconds is no longer the sum of its terms)
    return std::nullopt;
  }
  const double own = o.predicted_ttft_s - o.predicted_wait_s;  // prefill + load
  if (o.predicted_wait_s > options.max_wait_share * own) return std::nullopt;
  const double residual = o.measured_ttft_s - (o.predicted_ttft_s - o.predicted_load_s);
  if (!(residual > 0)) return std::nullopt;
  return TierLoadSample{static_cast<Tier>(dominant), o.load_bytes[dominant], residual};
}

}  // namespace kvroute::fleet
