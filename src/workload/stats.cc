#include "workload/stats.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

namespace kvroute::workload {
namespace {

double SortedPercentile(const std::vector<double>& sorted, double q) {
  const double rank = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = static_cast<std::size_t>(std::ceil(rank));
  return sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

std::optional<double> Percentile(std::span<const double> samples, double q) {
  assert(q >= 0 && q <= 1);
  if (samples.empty()) return std::nullopt;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  return SortedPercentile(sorted, q);
}

Summary Summarize(std::span<const double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  s.count = sorted.size();
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(s.count);
  s.min = sorted.front();
  s.max = sorted.back();
  s.p50 = SortedPercentile(sorted, 0.50);
  s.p90 = SortedPercentile(sorted, 0.90);
  s.p99 = SortedPercentile(sorted, 0.99);
  return s;
}

}  // namespace kvroute::workload
