#include "bench/topology_run.h"

#include <iostream>

#include "bench/plot.h"
#include "client/blocking_http_client.h"

namespace kvroute::bench {
namespace {

// The decode sims' transfers since they started (they start cold for every run); nullopt
// when none of them exports the NIXL histograms.
std::optional<TransferStats> ReadDecodeTransfers(const std::vector<SimInfo>& sims) {
  client::ClientOptions options;
  options.timeouts.connect = std::chrono::milliseconds(2000);
  options.timeouts.total = std::chrono::milliseconds(5000);
  client::BlockingHttpClient http(options);
  TransferStats stats;
  TransferBuckets buckets;
  bool any = false;
  for (const auto& sim : sims) {
    if (sim.role != "decode") continue;
    auto request = client::MakeRequest("GET", sim.url + "/metrics");
    if (!request) continue;
    auto response = http.Send(*request);
    if (!response || response->status != 200) continue;
    any = AccumulateTransfers(response->body, &stats) || any;
    AccumulateTransferBuckets(response->body, &buckets);
  }
  if (!any) return std::nullopt;
  stats.time_p50_s = BucketQuantile(buckets.time, 0.5);
  stats.time_p99_s = BucketQuantile(buckets.time, 0.99);
  return stats;
}

}  // namespace

std::expected<TopologyResult, std::string> RunTopologyCompare(
    const CompareOptions& options, const std::vector<Topology>& topologies,
    const RunnerOptions& run, const workload::RunReport& report) {
  for (const auto& t : topologies) {
    for (const auto& router : options.routers) {
      if (!IsKnownRouterName(router)) return std::unexpected("unknown router " + router);
      if (!RouterFitsTopology(router, t)) {
        return std::unexpected(router + " cannot route " + t.name +
                               " (a P/D fleet needs kvroute's two-leg exchange)");
      }
    }
  }
  TopologyResult result;
  const std::size_t n = topologies.size() * options.routers.size();
  std::size_t i = 0;
  for (const auto& t : topologies) {
    for (const auto& router : options.routers) {
      ++i;
      const std::string label = t.name + "/" + router;
      if (options.progress) {
        std::cerr << "[topology " << i << "/" << n << "] " << label << ": starting "
                  << t.sims.size() << " cold sims (" << t.gpus << " GPUs) + router" << std::endl;
      }
      ClusterOptions c = ClusterOptionsFor(options, report, router);
      c.dir = options.out_dir + "/cluster/" + t.name;  // the router's own folder below it
      c.launches = t.sims;
      Cluster cluster(c);
      if (auto ok = cluster.StartSims(); !ok) return std::unexpected(label + ": " + ok.error());
      if (auto ok = cluster.StartRouter(router); !ok) {
        return std::unexpected(label + ": " + ok.error());
      }
      RunnerOptions r = RunnerOptionsFor(run, cluster);
      workload::RunReport one = report;
      one.label = t.name + "_" + RouterDirName(router);
      one.gpus = t.gpus;
      one.config.push_back({"topology", t.name});
      if (auto ran = RunBenchmark(r, one); !ran) return std::unexpected(label + ": " + ran.error());
      TopologyRow row;
      row.topology = t.name;
      row.router = router;
      row.gpus = t.gpus;
      if (t.pd) row.transfer = ReadDecodeTransfers(cluster.sims());
      cluster.Stop();
      if (auto wrote = workload::WriteRunFiles(one, options.out_dir); !wrote) {
        return std::unexpected(wrote.error());
      }
      if (options.plots) (void)WritePlots(one, options.out_dir);
      row.row = CompareRowOf(one);
      row.row.router = label;
      if (options.progress) {
        std::cerr << "[topology " << i << "/" << n << "] " << label << ": done, " << row.row.ok
                  << " ok, " << row.row.failed << " failed" << std::endl;
      }
      result.rows.push_back(std::move(row));
      result.runs.push_back(std::move(one));
    }
  }
  FillTopologyRatios(result.rows);
  return result;
}

}  // namespace kvroute::bench
