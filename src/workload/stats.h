// Summary statistics for latency samples.
//
// Percentiles use linear interpolation between closest ranks (numpy's default "linear"
// method): for sorted x[0..n-1] and q in [0,1], rank r = q·(n−1), p = x[⌊r⌋] + (r−⌊r⌋)·(x[⌈r⌉]−x[⌊r⌋]).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace kvroute::workload {

// nullopt for an empty sample. REQUIRES: 0 <= q <= 1.
std::optional<double> Percentile(std::span<const double> samples, double q);

struct Summary {
  std::size_t count = 0;
  double mean = 0, min = 0, max = 0, p50 = 0, p90 = 0, p99 = 0;
};

// All zeros with count 0 for an empty sample.
Summary Summarize(std::span<const double> samples);

}  // namespace kvroute::workload
