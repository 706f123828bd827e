// The pure parts of `kvroute bench overhead`: a level's summary, added latency against the
// direct baseline, ratios and verdicts against the targets, and the writers.
#include "bench/overhead.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <sstream>

namespace kvroute::bench {
namespace {

// n ok samples, one every 10 ms, each with latency `base + i·step` and `chunks` chunks.
std::vector<OverheadSample> Samples(int n, double base, double step, std::uint32_t chunks) {
  std::vector<OverheadSample> out;
  for (int i = 0; i < n; ++i) {
    OverheadSample s;
    s.start_s = 0.01 * i;
    s.latency_s = base + step * i;
    s.e2e_s = s.latency_s + 0.002;
    s.chunks = chunks;
    out.push_back(s);
  }
  return out;
}

OverheadLevel Level(std::string target, int conc, double rps, double p50, double p99) {
  OverheadLevel l;
  l.target = std::move(target);
  l.concurrency = conc;
  l.elapsed_s = 10;
  l.ok = static_cast<std::size_t>(rps * 10);
  l.chunks = l.ok * 10;
  l.latency.count = l.ok;
  l.latency.p50 = p50;
  l.latency.p90 = (p50 + p99) / 2;
  l.latency.p99 = p99;
  return l;
}

OverheadReport Report() {
  OverheadReport r;
  r.config.workers = 2;
  r.config.speedup = 1000;
  r.config.stream = true;
  r.config.prompt_tokens = 128;
  r.config.output_tokens = 32;
  r.config.requests = 100;
  r.config.policy = "predicted_latency";
  r.levels = {Level("direct", 8, 1000, 0.0010, 0.0030), Level("nginx-rr", 8, 800, 0.0012, 0.0036),
              Level("kvroute:predicted_latency", 8, 700, 0.0015, 0.0045),
              Level("kvroute:round_robin", 8, 600, 0.0014, 0.0038)};
  return r;
}

TEST(SummarizeOverheadLevel, CountsOkAndErrorsByKind) {
  auto samples = Samples(4, 0.001, 0.001, 5);
  samples[1].error_kind = "http_5xx";
  samples[2].error_kind = "http_5xx";
  samples[3].error_kind = "closed_early";
  const OverheadLevel l = SummarizeOverheadLevel("direct", 4, samples, 1.0);
  EXPECT_EQ(l.ok, 1u);
  EXPECT_EQ(l.errors, 3u);
  EXPECT_EQ(l.error_kinds.at("http_5xx"), 2u);
  EXPECT_EQ(l.error_kinds.at("closed_early"), 1u);
}

TEST(SummarizeOverheadLevel, LatencyAndChunksComeFromOkRequestsOnly) {
  auto samples = Samples(3, 0.001, 0.001, 7);
  samples[2].error_kind = "stream";
  samples[2].latency_s = 99;  // a failed request must not move the percentiles
  const OverheadLevel l = SummarizeOverheadLevel("direct", 1, samples, 1.0);
  EXPECT_EQ(l.chunks, 14u);
  EXPECT_EQ(l.latency.count, 2u);
  EXPECT_DOUBLE_EQ(l.latency.max, 0.002);
}

TEST(SummarizeOverheadLevel, RatesUseTheGivenElapsedTime) {
  const auto samples = Samples(50, 0.001, 0, 4);
  const OverheadLevel l = SummarizeOverheadLevel("nginx-rr", 2, samples, 2.0);
  EXPECT_DOUBLE_EQ(l.RequestsPerS(), 25.0);
  EXPECT_DOUBLE_EQ(l.ChunksPerS(), 100.0);
}

TEST(SummarizeOverheadLevel, ElapsedFallsBackToFirstStartToLastEnd) {
  const auto samples = Samples(11, 0.001, 0, 1);  // starts 0..0.1 s, each lasts 3 ms
  const OverheadLevel l = SummarizeOverheadLevel("direct", 1, samples);
  EXPECT_NEAR(l.elapsed_s, 0.103, 1e-12);
}

TEST(SummarizeOverheadLevel, EmptyLevelHasZeroRates) {
  const OverheadLevel l = SummarizeOverheadLevel("direct", 1, {});
  EXPECT_EQ(l.ok, 0u);
  EXPECT_EQ(l.RequestsPerS(), 0);
  EXPECT_EQ(l.ChunksPerS(), 0);
}

TEST(OverheadLevel, CpuPerRequestCountsWarmUpRequestsToo) {
  OverheadLevel l = Level("nginx-rr", 8, 100, 0.001, 0.002);
  l.all_requests = 1100;  // 1000 recorded + 100 warm-up
  l.proxy_cpu_s = 0.55;
  l.sims_cpu_s = 1.1;
  l.client_cpu_s = 0.55;
  EXPECT_DOUBLE_EQ(l.ProxyCpuUsPerRequest(), 500.0);
  EXPECT_DOUBLE_EQ(l.TotalCpuUsPerRequest(), 2000.0);
}

TEST(OverheadLevel, CpuPerRequestIsUnknownWithoutReadings) {
  OverheadLevel l = Level("nginx-rr", 8, 100, 0.001, 0.002);
  l.all_requests = 10;
  EXPECT_EQ(l.ProxyCpuUsPerRequest(), -1);
  l.proxy_cpu_s = 0.1;
  EXPECT_EQ(l.TotalCpuUsPerRequest(), -1);  // sims and client unknown
}

TEST(OverheadLevel, RunQueueWaitPerRequestCountsWarmUpRequestsToo) {
  OverheadLevel l = Level("kvroute:round_robin", 32, 100, 0.001, 0.002);
  l.all_requests = 1100;
  EXPECT_EQ(l.ProxyRunqUsPerRequest(), -1);  // not read
  l.proxy_runq_s = 2.2;
  EXPECT_DOUBLE_EQ(l.ProxyRunqUsPerRequest(), 2000.0);
}

TEST(OverheadCsv, EndsEachRowWithTheProxyRunQueueWait) {
  OverheadReport r = Report();
  for (auto& l : r.levels) {
    l.all_requests = 1000;
    l.proxy_runq_s = 0.25;
  }
  std::istringstream in(OverheadCsv(r));
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  EXPECT_TRUE(header.ends_with(",proxy_runq_us_per_request")) << header;
  EXPECT_TRUE(row.ends_with(",250.0")) << row;
}

TEST(AddedVsDirect, IsTheDifferenceAtEachPercentile) {
  const auto added =
      AddedVsDirect(Level("nginx-rr", 1, 10, 0.004, 0.010), Level("direct", 1, 10, 0.003, 0.006));
  ASSERT_TRUE(added);
  EXPECT_NEAR(added->p50, 0.001, 1e-12);
  EXPECT_NEAR(added->p90, 0.0025, 1e-12);
  EXPECT_NEAR(added->p99, 0.004, 1e-12);
}

TEST(AddedVsDirect, MayBeNegativeWhenTheProxyRunWasFaster) {
  const auto added =
      AddedVsDirect(Level("nginx-rr", 1, 10, 0.002, 0.005), Level("direct", 1, 10, 0.003, 0.006));
  ASSERT_TRUE(added);
  EXPECT_LT(added->p50, 0);
}

TEST(AddedVsDirect, NoneWithoutOkRequests) {
  OverheadLevel empty = Level("direct", 1, 0, 0, 0);
  empty.latency.count = 0;
  EXPECT_FALSE(AddedVsDirect(Level("nginx-rr", 1, 10, 0.004, 0.010), empty));
}

TEST(OverheadVerdicts, OnePerKvrouteTargetWithRatioAgainstNginx) {
  const auto verdicts = OverheadVerdicts(Report());
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_EQ(verdicts[0].target, "kvroute:predicted_latency");
  ASSERT_TRUE(verdicts[0].throughput_ratio);
  EXPECT_NEAR(*verdicts[0].throughput_ratio, 0.875, 1e-12);
  EXPECT_TRUE(verdicts[0].throughput_met);
  ASSERT_TRUE(verdicts[1].throughput_ratio);
  EXPECT_NEAR(*verdicts[1].throughput_ratio, 0.75, 1e-12);
  EXPECT_FALSE(verdicts[1].throughput_met);
}

TEST(OverheadVerdicts, LatencyTargetIsOneMillisecondAtP99) {
  const auto verdicts = OverheadVerdicts(Report());
  ASSERT_TRUE(verdicts[0].added_p99_s);
  EXPECT_NEAR(*verdicts[0].added_p99_s, 0.0015, 1e-12);  // 4.5 − 3.0 ms
  EXPECT_FALSE(verdicts[0].latency_met);
  EXPECT_NEAR(*verdicts[1].added_p99_s, 0.0008, 1e-12);  // 3.8 − 3.0 ms
  EXPECT_TRUE(verdicts[1].latency_met);
}

TEST(OverheadVerdicts, ComparesOnlyLevelsOfTheSameConcurrency) {
  OverheadReport r = Report();
  r.levels.push_back(Level("kvroute:predicted_latency", 32, 900, 0.001, 0.002));
  const auto verdicts = OverheadVerdicts(r);
  ASSERT_EQ(verdicts.size(), 3u);
  EXPECT_EQ(verdicts[2].concurrency, 32);
  EXPECT_FALSE(verdicts[2].throughput_ratio);  // no nginx-rr at c=32
  EXPECT_FALSE(verdicts[2].added_p99_s);       // no direct at c=32
  EXPECT_FALSE(verdicts[2].throughput_met);
}

TEST(OverheadTable, HasARowPerLevelWithAddedLatencyAndRatio) {
  const std::string t = OverheadTable(Report());
  // kvroute:predicted_latency: 700 req/s, 7000 chunks/s, p50 1.50 ms, +0.50 / +1.50 ms, 0.88x.
  EXPECT_NE(t.find("kvroute:predicted_latency"), std::string::npos) << t;
  EXPECT_NE(t.find("700.0"), std::string::npos) << t;
  EXPECT_NE(t.find("7000"), std::string::npos) << t;
  EXPECT_NE(t.find("+0.50"), std::string::npos) << t;
  EXPECT_NE(t.find("+1.50"), std::string::npos) << t;
  EXPECT_NE(t.find("0.88"), std::string::npos) << t;
  EXPECT_NE(t.find("TTFT"), std::string::npos) << t;
}

TEST(OverheadTable, HeaderNamesEveryColumn) {
  const std::string t = OverheadTable(Report());
  EXPECT_NE(t.find("xnginx proxyCPU   allCPU proxyRunq\n"), std::string::npos) << t;
}

TEST(OverheadTable, DirectRowHasNoAddedLatency) {
  const std::string t = OverheadTable(Report());
  std::istringstream in(t);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("    8  direct ")) continue;
    EXPECT_EQ(line.find('+'), std::string::npos) << line;
    return;
  }
  FAIL() << "no direct row in\n" << t;
}

TEST(OverheadTable, StatesEachVerdict) {
  const std::string t = OverheadTable(Report());
  EXPECT_NE(t.find("c=8 kvroute:predicted_latency: req/s 0.88x nginx-rr (target >= 0.8: met); "
                   "added p99 +1.50 ms (target <= 1 ms: NOT met)"),
            std::string::npos)
      << t;
}

TEST(OverheadTable, NonStreamedRunsReportE2E) {
  OverheadReport r = Report();
  r.config.stream = false;
  EXPECT_NE(OverheadTable(r).find("latency = E2E"), std::string::npos);
}

TEST(OverheadJson, CarriesLevelsAddedLatencyRatiosAndVerdicts) {
  const auto doc = boost::json::parse(OverheadJson(Report())).as_object();
  const auto& levels = doc.at("levels").as_array();
  ASSERT_EQ(levels.size(), 4u);
  const auto& kv = levels[2].as_object();
  EXPECT_EQ(kv.at("target").as_string(), "kvroute:predicted_latency");
  EXPECT_NEAR(kv.at("added_vs_direct_ms").as_object().at("p99").as_double(), 1.5, 1e-9);
  EXPECT_NEAR(kv.at("requests_per_s_vs_nginx_rr").as_double(), 0.875, 1e-9);
  EXPECT_FALSE(levels[0].as_object().contains("added_vs_direct_ms"));  // direct itself
  EXPECT_EQ(doc.at("verdicts").as_array().size(), 2u);
  EXPECT_EQ(doc.at("config").as_object().at("latency_metric").as_string(), "ttft");
}

TEST(OverheadCsv, OneRowPerLevelPlusHeader) {
  const std::string csv = OverheadCsv(Report());
  std::istringstream in(csv);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_TRUE(lines[0].starts_with("concurrency,target,"));
  EXPECT_TRUE(lines[3].starts_with("8,kvroute:predicted_latency,7000,0,")) << lines[3];
  EXPECT_NE(lines[3].find(",1.500,"), std::string::npos) << lines[3];  // added p99 ms
}

}  // namespace
}  // namespace kvroute::bench
