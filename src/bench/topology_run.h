// The loop of `kvroute bench compare --topology`: for each topology and each router, a fresh
// cluster of that topology's sims (bench/topology.h) behind the router, the same workload
// (RunBenchmark), the report's GPUs set to the topology's (so goodput is per GPU of that
// fleet), and, before the cluster stops, the decode sims' NIXL histograms read for the
// transfer cost. Run files go to <out>/<topology>_<router>.json...
//
// Ownership: each cluster lives only inside its iteration. Thread safety: one thread.
#pragma once

#include <expected>
#include <string>
#include <vector>

#include "bench/compare_run.h"
#include "bench/topology.h"
#include "bench/topology_report.h"

namespace kvroute::bench {

struct TopologyResult {
  std::vector<workload::RunReport> runs;
  std::vector<TopologyRow> rows;  // ratios filled against the first topology, per router
};

// options.cluster supplies what every sim shares (speedup, seed, max_model_len); its
// `launches` and `workers` are replaced per topology. A router that cannot route a topology
// (nginx on a P/D fleet) is an error before anything starts.
std::expected<TopologyResult, std::string> RunTopologyCompare(
    const CompareOptions& options, const std::vector<Topology>& topologies,
    const RunnerOptions& run, const workload::RunReport& report);

}  // namespace kvroute::bench
