#include "fleet/link_learner.h"

#include <cmath>

namespace kvroute::fleet {

LinkLearner::LinkLearner(double lane_bytes_per_s, double latency_s, LinkLearnerOptions options)
    : options_(options),
      seed_(lane_bytes_per_s),
      latency_s_(latency_s),
      weight_(options.prior_samples),
      log_sum_(0) {}

bool LinkLearner::Observe(double bytes, std::uint32_t lanes, double seconds) {
  const double moving = seconds - latency_s_;
  if (!(seed_ > 0) || lanes == 0 || !std::isfinite(bytes) || !(bytes > 0) ||
      !std::isfinite(seconds) || !(moving > 0)) {
    ++rejected_;
    return false;
  }
  const double observed = bytes / lanes / moving;
  if (!std::isfinite(observed) || !(observed > 0)) {
    ++rejected_;
    return false;
  }
  weight_ = options_.forgetting * weight_ + 1;
  log_sum_ = options_.forgetting * log_sum_ + std::log(observed / seed_);
  ++samples_;
  return true;
}

std::optional<double> LinkLearner::lane_bytes_per_s() const {
  if (!(seed_ > 0)) return std::nullopt;
  return seed_ * std::exp(log_sum_ / weight_);
}

}  // namespace kvroute::fleet
