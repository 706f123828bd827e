// The loop of `kvroute bench compare`: for each router, a fresh cluster (cold sims, then the
// router), the same workload through it (RunBenchmark, scraping every sim's /metrics), its
// run files under <out>/<router>.json..., then the cluster is stopped before the next one.
//
// Ownership: each cluster lives only inside its iteration; on any error it is stopped before
// returning. Thread safety: one thread (it forks children).
#pragma once

#include <expected>
#include <functional>
#include <string>
#include <vector>

#include "bench/cluster.h"
#include "bench/compare.h"
#include "bench/runner.h"

namespace kvroute::bench {

inline const std::vector<std::string> kDefaultCompareRouters = {"nginx-rr",
                                                                "nginx-lc",
                                                                "kvroute:round_robin",
                                                                "kvroute:random",
                                                                "kvroute:least_load",
                                                                "kvroute:approx_prefix",
                                                                "kvroute:dynamo_cost",
                                                                "kvroute:llmd_sticky",
                                                                "kvroute:predicted_latency"};

struct CompareOptions {
  ClusterOptions cluster;  // dir: ignored, <out_dir>/cluster/<router> is used
  std::vector<std::string> routers = kDefaultCompareRouters;
  std::string out_dir = "bench-results/compare";
  bool plots = true;
  bool progress = true;  // a line per router on stderr
};

struct CompareResult {
  std::vector<workload::RunReport> runs;
  std::vector<CompareRow> rows;  // ratios filled against nginx-rr when it ran
};

// One router's cluster options: options.cluster with its own folder
// (<out_dir>/cluster/<router, ':' → '_'>) and, unless options.cluster sets one, `kvroute
// serve`'s scheduler.itl_slo_s = the first of report.itl_targets_tps (Infera's headline
// per-user target, model time) in wall time (WallItlSlo: / speedup).
ClusterOptions ClusterOptionsFor(const CompareOptions& options, const workload::RunReport& report,
                                 const std::string& router);

// `run` aimed at a started cluster: its router as the target, every sim's /metrics scraped,
// and the sims' model when `run` names none.
RunnerOptions RunnerOptionsFor(const RunnerOptions& run, const Cluster& cluster);

// `run` is the workload (target_url, metrics_urls and model are set per router); `report`
// the template of every run's report (config, gpus, targets; the label becomes the router).
std::expected<CompareResult, std::string> RunCompare(const CompareOptions& options,
                                                     const RunnerOptions& run,
                                                     const workload::RunReport& report);

}  // namespace kvroute::bench
