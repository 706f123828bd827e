// LinkLearner: the KV-transfer bandwidth of one decode worker's link, per NIC lane, learned
// online from observed pulls (DESIGN §5: transfer bandwidth is a rate that decides
// saturation, so it is learned, seeded from the link spec, never hand-calibrated).
//
// Model (the engine's, engine/kv_transfer.h): a pull of `bytes` over `lanes` lanes takes
//   latency + bytes / (lanes × lane_bytes_per_s).
// A sample is one finished pull: lane_bytes_per_s_obs = bytes / lanes / (seconds − latency).
// Concurrent pulls into one engine share its lanes, so under load the observed per-lane
// bandwidth drops below the spec's; that is exactly what the router must price.
//
// Estimator: a weighted mean in log space (bandwidths are scale quantities: a pull at half
// and one at double the seed average to the seed) with exponential forgetting `forgetting`
// per sample; the seed counts as `prior_samples` samples. Samples that are not finite, not
// positive, or no longer than the latency (nothing to learn about bandwidth) are rejected and
// counted.
//
// Thread safety: a plain value; RouterState keeps one per worker under its table lock.
#pragma once

#include <cstdint>
#include <optional>

namespace kvroute::fleet {

struct LinkLearnerOptions {
  double prior_samples = 10;   // weight of the seed, in samples
  double forgetting = 0.99;    // per sample: an effective memory of ~100 pulls
};

class LinkLearner {
 public:
  LinkLearner() = default;
  // `lane_bytes_per_s` > 0 and finite, `latency_s` >= 0 (REQUIRES; RouterState::Add checks).
  LinkLearner(double lane_bytes_per_s, double latency_s, LinkLearnerOptions options = {});

  // One finished pull. Returns false (and learns nothing) for an unusable sample.
  bool Observe(double bytes, std::uint32_t lanes, double seconds);

  // Per-lane bandwidth now, bytes/s; nullopt without a seed.
  std::optional<double> lane_bytes_per_s() const;
  double latency_s() const { return latency_s_; }
  double seed_lane_bytes_per_s() const { return seed_; }
  std::uint64_t samples() const { return samples_; }
  std::uint64_t rejected() const { return rejected_; }

 private:
  LinkLearnerOptions options_;
  double seed_ = 0;     // 0: no link
  double latency_s_ = 0;
  double weight_ = 0;   // Σ weights (forgotten geometrically)
  double log_sum_ = 0;  // Σ weight · log(bandwidth / seed); the seed's own terms are 0
  std::uint64_t samples_ = 0;
  std::uint64_t rejected_ = 0;
};

}  // namespace kvroute::fleet
