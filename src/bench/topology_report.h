// The report of `kvroute bench compare --topology`: one row per topology × router, with
// goodput per GPU (the topology's own GPU count) at each per-user target, its ratio against the
// first topology under the same router, latency and hit rates (from CompareRowOf), and, for a
// P/D fleet, the KV transfers its decode sims report in vLLM's NIXL histograms
// (vllm:nixl_bytes_transferred, vllm:nixl_xfer_time_seconds; a sped-up sim reports model time).
//
// Transfer percentiles come from the histogram buckets (linear within a bucket, as
// Prometheus's histogram_quantile), so they are as coarse as the buckets. A ratio or figure
// that cannot be computed is absent (null), never made up.
//
// Thread safety: pure functions, except WriteTopologyFiles.
#pragma once

#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/compare.h"

namespace kvroute::bench {

struct TransferStats {
  double transfers = 0;   // pulls finished (histogram count)
  double bytes = 0;       // bytes moved (histogram sum)
  double time_sum_s = 0;  // summed pull time, model seconds
  std::optional<double> time_p50_s, time_p99_s;
};

// Sums the NIXL histograms of one /metrics exposition into `stats` (call once per decode
// sim). Returns false when the exposition has no NIXL transfer histogram.
bool AccumulateTransfers(std::string_view exposition, TransferStats* stats);
// The cumulative buckets accumulated so far (upper bound, count), for the percentiles.
struct TransferBuckets {
  std::vector<std::pair<double, double>> time;  // le seconds → cumulative count
};
bool AccumulateTransferBuckets(std::string_view exposition, TransferBuckets* buckets);
// The q-quantile (0..1) of cumulative buckets sorted by bound; nullopt when empty.
std::optional<double> BucketQuantile(const std::vector<std::pair<double, double>>& buckets,
                                     double q);

struct TopologyRow {
  std::string topology, router;
  int gpus = 0;
  CompareRow row;  // goodput already per GPU of this topology (report.gpus)
  std::vector<std::optional<double>> goodput_ratio;  // ÷ the first topology, same router
  std::optional<TransferStats> transfer;             // P/D topologies only
  std::optional<double> transfer_share_of_ttft;      // summed pull time ÷ summed TTFT
};

// Fills goodput_ratio (against the first row of the same router) and transfer_share_of_ttft.
void FillTopologyRatios(std::vector<TopologyRow>& rows);

std::string TopologyTable(const std::vector<TopologyRow>& rows, double speedup);
std::string TopologyJson(const std::vector<TopologyRow>& rows, double speedup);

// Writes topology.json into `dir`.
std::expected<void, std::string> WriteTopologyFiles(const std::vector<TopologyRow>& rows,
                                                    double speedup, const std::string& dir);

}  // namespace kvroute::bench
