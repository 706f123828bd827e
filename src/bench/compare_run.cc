#include "bench/compare_run.h"

#include <iostream>

#include "bench/plot.h"

namespace kvroute::bench {

ClusterOptions ClusterOptionsFor(const CompareOptions& options, const workload::RunReport& report,
                                 const std::string& router) {
  ClusterOptions c = options.cluster;
  if (c.itl_slo_s <= 0 && !report.itl_targets_tps.empty()) {
    // The ITL guard judges against the headline per-user target, in the router's wall time.
    c.itl_slo_s = WallItlSlo(report.itl_targets_tps.front(), c.speedup);
  }
  std::string safe = router;
  for (char& ch : safe) {
    if (ch == ':') ch = '_';
  }
  c.dir = options.out_dir + "/cluster/" + safe;
  return c;
}

RunnerOptions RunnerOptionsFor(const RunnerOptions& run, const Cluster& cluster) {
  RunnerOptions r = run;
  r.target_url = cluster.router_url();
  r.metrics_urls.clear();
  for (const auto& sim : cluster.sims()) r.metrics_urls.push_back(sim.url + "/metrics");
  if (r.model.empty() && !cluster.sims().empty()) r.model = cluster.sims().front().model;
  return r;
}

std::expected<CompareResult, std::string> RunCompare(const CompareOptions& options,
                                                     const RunnerOptions& run,
                                                     const workload::RunReport& report) {
  for (const auto& router : options.routers) {
    if (!IsKnownRouterName(router)) return std::unexpected("unknown router " + router);
  }
  CompareResult result;
  const std::size_t n = options.routers.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& router = options.routers[i];
    if (options.progress) {
      std::cerr << "[compare " << (i + 1) << "/" << n << "] " << router << ": starting "
                << options.cluster.workers << " cold sims + router" << std::endl;
    }
    Cluster cluster(ClusterOptionsFor(options, report, router));
    if (auto ok = cluster.StartSims(); !ok) return std::unexpected(router + ": " + ok.error());
    if (auto ok = cluster.StartRouter(router); !ok) {
      return std::unexpected(router + ": " + ok.error());
    }
    RunnerOptions r = RunnerOptionsFor(run, cluster);
    workload::RunReport one = report;
    one.label = router;
    if (auto ran = RunBenchmark(r, one); !ran) return std::unexpected(router + ": " + ran.error());
    cluster.Stop();
    if (auto wrote = workload::WriteRunFiles(one, options.out_dir); !wrote) {
      return std::unexpected(wrote.error());
    }
    if (options.plots) (void)WritePlots(one, options.out_dir);  // the compare chart reports
    CompareRow row = CompareRowOf(one);
    if (options.progress) {
      std::cerr << "[compare " << (i + 1) << "/" << n << "] " << router << ": done, " << row.ok
                << " ok, " << row.failed << " failed" << std::endl;
    }
    result.rows.push_back(std::move(row));
    result.runs.push_back(std::move(one));
  }
  FillRatios(result.rows, "nginx-rr");
  return result;
}

}  // namespace kvroute::bench
