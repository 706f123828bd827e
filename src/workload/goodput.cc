#include "workload/goodput.h"

#include <algorithm>
#include <cassert>

namespace kvroute::workload {

double Tpot(const RequestResult& r) {
  if (r.output_tokens <= 1) return 0;
  return (r.e2e_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1);
}

InferaGoodput ComputeInferaGoodput(std::span<const ConcurrencyLevel> levels,
                                   double target_tokens_per_s_per_user, int num_gpus) {
  assert(target_tokens_per_s_per_user > 0 && num_gpus > 0);
  InferaGoodput out;
  const double max_itl = 1.0 / target_tokens_per_s_per_user;
  for (const auto& level : levels) {
    InferaPoint p;
    p.concurrency = level.concurrency;
    p.itl_p50_s = level.itl_p50_s;
    p.tokens_per_s_per_gpu =
        level.duration_s > 0 ? static_cast<double>(level.total_tokens) / level.duration_s / num_gpus : 0;
    p.meets_target = level.itl_p50_s > 0 && level.itl_p50_s <= max_itl;
    out.points.push_back(p);
  }
  std::sort(out.points.begin(), out.points.end(),
            [](const InferaPoint& a, const InferaPoint& b) { return a.concurrency < b.concurrency; });
  for (const auto& p : out.points) {
    if (p.meets_target) {
      out.tokens_per_s_per_gpu = p.tokens_per_s_per_gpu;
      out.at_concurrency = p.concurrency;
    }
  }
  return out;
}

std::optional<double> SloAttainment(std::span<const RequestResult> requests, const SloTargets& slo) {
  if (requests.empty()) return std::nullopt;
  std::size_t good = 0;
  for (const auto& r : requests) {
    if (r.ok && r.ttft_s <= slo.ttft_s && Tpot(r) <= slo.tpot_s) ++good;
  }
  return static_cast<double>(good) / static_cast<double>(requests.size());
}

DistServeGoodput ComputeDistServeGoodput(std::span<const RateLevel> levels, const SloTargets& slo,
                                         int num_gpus) {
  assert(num_gpus > 0);
  DistServeGoodput out;
  for (const auto& level : levels) {
    auto a = SloAttainment(level.requests, slo);
    if (!a) continue;
    out.points.push_back({level.rate_per_s, *a});
  }
  std::sort(out.points.begin(), out.points.end(),
            [](const DistServePoint& a, const DistServePoint& b) { return a.rate_per_s < b.rate_per_s; });
  for (const auto& p : out.points) {
    if (p.attainment >= slo.min_attainment) out.rate_per_s = p.rate_per_s;
  }
  if (out.rate_per_s) out.rate_per_s_per_gpu = *out.rate_per_s / num_gpus;
  return out;
}

std::optional<double> HitRate(double queries_before, double queries_after, double hits_before,
                              double hits_after) {
  const double queries = queries_after - queries_before;
  const double hits = hits_after - hits_before;
  if (queries <= 0 || hits < 0 || hits > queries) return std::nullopt;
  return hits / queries;
}

}  // namespace kvroute::workload
