// TierLoadLearner: one worker's load bandwidth from each lower KV tier (host memory, local
// disk, the shared store) into GPU memory, learned online and seeded from the worker's spec
// (DESIGN §5: a tier's bandwidth decides what a cached prefix costs, so it is learned, never
// a hand-calibrated constant; issue 20 "Routing on tier cost, learned").
//
// Samples are (bytes, seconds) of one tier's load, from one of two sources:
//   kTransfer  the engine's own counters of finished loads, e.g. vLLM's
//              vllm:kv_offload_total_bytes_total / vllm:kv_offload_total_time_total
//              {transfer_type="CPU_to_GPU"} between two scrapes (RouterState::OnTierLoad).
//              Exact: once a tier has one, TTFT samples for it are ignored (counted).
//   kTtft      what a first token says (AttributeTierLoad below): the part of the measured
//              TTFT that the prediction's other terms do not explain, charged to the one
//              lower tier that carried nearly all of the request's loaded bytes.
// A sample's bandwidth is bytes / seconds.
//
// Estimator (LinkLearner's, with bounds): per tier a weighted mean of log(bandwidth / seed)
// with exponential forgetting `forgetting` per sample; the seed counts as `prior_samples`
// samples. Each sample's log ratio is clipped to ±log(max_factor), so the estimate stays
// within [seed / max_factor, seed × max_factor]: a TTFT residual is a difference of two
// noisy times, and one near-zero residual would otherwise read as an infinitely fast disk.
// Why 8: the engine model's tiers span 25 GB/s (host) to 6.5 GB/s (disk) and a loaded PCIe
// or NIC halves them again, so a seed off by the profile's whole range (≈ 4×) is still
// learnable, while a burst of bad samples cannot make a tier look like another medium
// entirely. Samples that are not finite, not positive, or for a tier without a seed are
// rejected and counted; without samples every value is its seed. A tier with no seed has no
// bandwidth (the cost model recomputes its blocks) and learns nothing.
//
// Thread safety: a plain value; RouterState keeps one per worker under its table lock.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "common/tier.h"

namespace kvroute::fleet {

struct TierLoadLearnerOptions {
  double prior_samples = 10;  // weight of the seed, in samples
  double forgetting = 0.98;   // per sample: an effective memory of ~50 loads
  double max_factor = 8;      // estimate within [seed / max_factor, seed × max_factor]
};

enum class TierSampleSource : std::uint8_t { kTtft, kTransfer };

class TierLoadLearner {
 public:
  using Bandwidths = std::array<std::optional<double>, kNumTiers>;

  TierLoadLearner() = default;
  // Seeds per tier, bytes/s (the GPU entry is ignored); an entry that is missing, not
  // finite or not positive leaves that tier unseeded.
  explicit TierLoadLearner(const Bandwidths& seeds, TierLoadLearnerOptions options = {});

  // One load of `bytes` from `tier` that took `seconds`. False (nothing learned) for an
  // unusable sample, a tier without a seed, or a TTFT sample on a tier with transfer samples.
  bool Observe(Tier tier, double bytes, double seconds, TierSampleSource source);

  // The learned bandwidth, bytes/s; nullopt for GPU and unseeded tiers. Always finite and
  // within [seed / max_factor, seed × max_factor].
  std::optional<double> bytes_per_s(Tier tier) const;
  Bandwidths bytes_per_s() const;  // all tiers (GPU: nullopt)
  std::optional<double> seed(Tier tier) const;
  std::uint64_t samples(Tier tier) const { return At(tier).samples; }
  std::uint64_t transfer_samples(Tier tier) const { return At(tier).transfer_samples; }
  std::uint64_t rejected(Tier tier) const { return At(tier).rejected; }

 private:
  struct PerTier {
    double seed = 0;     // 0: unseeded
    double weight = 0;   // Σ weights (forgotten geometrically), prior included
    double log_sum = 0;  // Σ weight · clipped log(bandwidth / seed); the prior's terms are 0
    double current = 0;  // seed · exp(log_sum / weight), kept so a snapshot reads no exp()
    std::uint64_t samples = 0;
    std::uint64_t transfer_samples = 0;
    std::uint64_t rejected = 0;
  };
  const PerTier& At(Tier t) const { return tiers_[static_cast<int>(t)]; }

  TierLoadLearnerOptions options_;
  std::array<PerTier, kNumTiers> tiers_{};
};

// What a routed request tells the tier learner at its first token (RouterState fills it at
// Book from sched::PlanLoad at the worker's bandwidths then, and adds the measured TTFT).
struct TierLoadObservation {
  std::array<double, kNumTiers> load_bytes{};  // bytes each lower tier loads (GPU: 0)
  double predicted_ttft_s = 0;                 // the decision's whole prediction
  double predicted_wait_s = 0;                 // its queue-dependent part
  double predicted_load_s = 0;                 // its tier-load part (the slowest tier's)
  std::uint64_t queued_ahead_tokens = 0;       // prefill booked ahead on the worker at route
  double measured_ttft_s = 0;
};

struct TierAttributionOptions {
  // The tier charged must carry at least this share of the request's lower-tier bytes: tiers
  // load in parallel, so with two comparable loads the residual belongs to neither alone.
  double min_dominant_share = 0.8;
  // The queue-dependent part of the prediction must be at most this multiple of its own part
  // (prefill + load): a residual that is mostly queueing error says nothing about the tier.
  double max_wait_share = 1.0;
};

struct TierLoadSample {
  Tier tier = Tier::kCpu;
  double bytes = 0;
  double seconds = 0;
};

// The tier-load sample a first token gives, or nullopt (skipped) when: no lower tier loaded
// anything; no lower tier dominates; the worker had prefill booked ahead at route, i.e. a
// request still waiting for its first token (its load or prefill delays this one, and the
// residual is the queue's error); the prediction's wait
// dominates it; the prediction is not a usable number; or the residual
//   measured − (predicted_ttft − predicted_load)
// (the TTFT not explained by the prediction's prefill and wait terms) is not positive.
// The sample charges that residual to the dominant tier's bytes. Pure.
std::optional<TierLoadSample> AttributeTierLoad(const TierLoadObservation& o,
                                                const TierAttributionOptions& options = {});

}  // namespace kvroute::fleet
