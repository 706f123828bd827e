#include "bench/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/compare_run.h"

namespace kvroute::bench {
namespace {

// A closed-loop run of one level: `n` ok requests of 100 output tokens each over `duration`
// seconds, every inter-token gap `itl` seconds.
workload::RunReport Fixture(const std::string& label, int n, double duration, double itl,
                  std::optional<double> hit = std::nullopt) {
  workload::RunReport run;
  run.label = label;
  run.workload = "agentic";
  run.itl_targets_tps = {30, 50};
  workload::LevelResult level;
  level.name = "c=4";
  level.concurrency = 4;
  level.duration_s = duration;
  level.hit_rate = hit;
  for (int i = 0; i < n; ++i) {
    workload::RequestRecord rec;
    rec.result.ok = true;
    rec.result.ttft_s = 0.1 * (i + 1);
    rec.result.prompt_tokens = 0;
    rec.result.output_tokens = 100;
    rec.result.itl_s.assign(99, itl);
    rec.result.e2e_s = rec.result.ttft_s + 99 * itl;
    level.requests.push_back(rec);
  }
  run.levels.push_back(level);
  return run;
}

TEST(CompareRowTest, PoolsRequestsAndComputesThroughput) {
  CompareRow row = CompareRowOf(Fixture("a", 10, 5.0, 0.01, 0.5));
  EXPECT_EQ(row.sent, 10u);
  EXPECT_EQ(row.ok, 10u);
  EXPECT_EQ(row.failed, 0u);
  EXPECT_DOUBLE_EQ(row.output_tokens_per_s, 1000.0 / 5.0);
  EXPECT_DOUBLE_EQ(row.itl.p50, 0.01);
  EXPECT_NEAR(row.ttft.p50, 0.55, 1e-9);
  ASSERT_TRUE(row.hit_rate.has_value());
  EXPECT_DOUBLE_EQ(*row.hit_rate, 0.5);
}

TEST(CompareRowTest, CountsFailedRequestsOutsideTheLatencies) {
  workload::RunReport run = Fixture("a", 2, 1.0, 0.01);
  workload::RequestRecord bad;
  bad.result.ok = false;
  bad.result.error_kind = "http_5xx";
  bad.result.ttft_s = 100;
  run.levels[0].requests.push_back(bad);
  CompareRow row = CompareRowOf(run);
  EXPECT_EQ(row.sent, 3u);
  EXPECT_EQ(row.failed, 1u);
  EXPECT_LT(row.ttft.max, 1.0);
}

TEST(CompareRowTest, WarmupRequestsAreNotCompared) {
  workload::RunReport run = Fixture("a", 2, 1.0, 0.01);
  workload::RequestRecord warm;
  warm.warmup = true;
  warm.result.ok = true;
  warm.result.ttft_s = 100;
  warm.result.output_tokens = 5000;
  run.levels[0].requests.push_back(warm);
  CompareRow row = CompareRowOf(run);
  EXPECT_EQ(row.sent, 2u);
  EXPECT_LT(row.ttft.max, 1.0);
  EXPECT_DOUBLE_EQ(row.output_tokens_per_s, CompareRowOf(Fixture("a", 2, 1.0, 0.01)).output_tokens_per_s);
}

TEST(CompareRowTest, GoodputIsAbsentWhenTheSpeedTargetIsMissed) {
  // ITL 0.1 s = 10 tokens/s/user: misses both 30 and 50.
  CompareRow row = CompareRowOf(Fixture("slow", 4, 1.0, 0.1));
  ASSERT_EQ(row.goodput.size(), 2u);
  EXPECT_FALSE(row.goodput[0].has_value());
  EXPECT_FALSE(row.goodput[1].has_value());
}

TEST(CompareRowTest, KeepsWhereGoodputWasTakenTheCpuTierAndTheSweepStop) {
  workload::RunReport run = Fixture("kvroute:x", 4, 1.0, 0.01, 0.8);
  run.levels[0].external_hit_rate = 0.1;
  workload::LevelResult second = run.levels[0];
  second.name = "c=8";
  second.concurrency = 8;
  second.external_hit_rate = 0.3;
  run.levels.push_back(second);
  run.sweep_stop = workload::SweepStop{.after_level = "c=8", .mean_itl_s = 0.05, .skipped = {16}};
  CompareRow row = CompareRowOf(run);
  ASSERT_EQ(row.goodput_at.size(), 2u);
  EXPECT_EQ(row.goodput_at[0], 8);  // both levels meet 30 tok/s; the higher one counts
  ASSERT_TRUE(row.external_hit_rate.has_value());
  EXPECT_DOUBLE_EQ(*row.external_hit_rate, 0.2);
  EXPECT_EQ(row.stopped_after, "c=8");
  auto doc = boost::json::parse(CompareJson({row}, CompareMeta{})).as_object();
  const auto& r = doc.at("routers").as_array()[0];
  EXPECT_EQ(r.at("goodput").as_array()[0].at("at_concurrency").as_int64(), 8);
  EXPECT_DOUBLE_EQ(r.at("external_hit_rate").as_double(), 0.2);
  EXPECT_EQ(r.at("stopped_after").as_string(), "c=8");
}

TEST(CompareRowTest, NoCpuTierAndNoStopAreAbsent) {
  CompareRow row = CompareRowOf(Fixture("a", 2, 1.0, 0.01, 0.5));
  EXPECT_FALSE(row.external_hit_rate.has_value());
  EXPECT_TRUE(row.stopped_after.empty());
  auto doc = boost::json::parse(CompareJson({row}, CompareMeta{})).as_object();
  EXPECT_TRUE(doc.at("routers").as_array()[0].at("external_hit_rate").is_null());
  EXPECT_TRUE(doc.at("routers").as_array()[0].at("stopped_after").is_null());
}

TEST(FillRatiosTest, BaselineIsOneAndOthersAreRelative) {
  std::vector<CompareRow> rows = {CompareRowOf(Fixture("nginx-rr", 10, 10.0, 0.01)),
                                  CompareRowOf(Fixture("kvroute:x", 10, 5.0, 0.01))};
  FillRatios(rows, "nginx-rr");
  ASSERT_TRUE(rows[0].throughput_ratio.has_value());
  EXPECT_DOUBLE_EQ(*rows[0].throughput_ratio, 1.0);
  ASSERT_TRUE(rows[1].throughput_ratio.has_value());
  EXPECT_DOUBLE_EQ(*rows[1].throughput_ratio, 2.0);
  ASSERT_TRUE(rows[0].goodput_ratio[0].has_value());
  EXPECT_DOUBLE_EQ(*rows[0].goodput_ratio[0], 1.0);
  ASSERT_TRUE(rows[1].goodput_ratio[0].has_value());
  EXPECT_DOUBLE_EQ(*rows[1].goodput_ratio[0], 2.0);
}

TEST(FillRatiosTest, NoRatioWithoutTheBaseline) {
  std::vector<CompareRow> rows = {CompareRowOf(Fixture("kvroute:x", 10, 5.0, 0.01))};
  FillRatios(rows, "nginx-rr");
  EXPECT_FALSE(rows[0].throughput_ratio.has_value());
  EXPECT_FALSE(rows[0].goodput_ratio[0].has_value());
}

TEST(FillRatiosTest, NoGoodputRatioWhenTheBaselineMissedTheTarget) {
  std::vector<CompareRow> rows = {CompareRowOf(Fixture("nginx-rr", 10, 10.0, 0.1)),
                                  CompareRowOf(Fixture("kvroute:x", 10, 5.0, 0.01))};
  FillRatios(rows, "nginx-rr");
  EXPECT_FALSE(rows[1].goodput_ratio[0].has_value());
  EXPECT_TRUE(rows[1].throughput_ratio.has_value());
}

TEST(CompareJsonTest, HasEveryRouterWithNullForAbsentValues) {
  std::vector<CompareRow> rows = {CompareRowOf(Fixture("nginx-rr", 10, 10.0, 0.01)),
                                  CompareRowOf(Fixture("kvroute:x", 10, 5.0, 0.1))};
  FillRatios(rows, "nginx-rr");
  auto doc = boost::json::parse(CompareJson(rows, CompareMeta{})).as_object();
  EXPECT_EQ(doc.at("schema").as_string(), "kvroute.bench.compare/1");
  const auto& routers = doc.at("routers").as_array();
  ASSERT_EQ(routers.size(), 2u);
  EXPECT_EQ(routers[0].at("router").as_string(), "nginx-rr");
  EXPECT_DOUBLE_EQ(routers[0].at("throughput_ratio").as_double(), 1.0);
  EXPECT_TRUE(routers[1].at("goodput").as_array()[0].at("tokens_per_s_per_gpu").is_null());
  EXPECT_TRUE(routers[0].at("hit_rate").is_null());
}

TEST(CompareCsvTest, OneHeaderAndOneLinePerRouter) {
  std::vector<CompareRow> rows = {CompareRowOf(Fixture("nginx-rr", 1, 1.0, 0.01)),
                                  CompareRowOf(Fixture("kvroute:x", 1, 1.0, 0.01))};
  const std::string csv = CompareCsv(rows);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_EQ(csv.rfind("router,sent,ok,failed,goodput_at_30,", 0), 0u);
}

TEST(CompareTableTest, NotesTheSpeedupMagnification) {
  std::vector<CompareRow> rows = {CompareRowOf(Fixture("nginx-rr", 1, 1.0, 0.01))};
  CompareMeta meta;
  meta.speedup = 20;
  const std::string table = CompareTable(rows, meta);
  EXPECT_NE(table.find("nginx-rr"), std::string::npos);
  EXPECT_NE(table.find("counts as 20 model milliseconds"), std::string::npos);
}

TEST(CompareTableTest, HeaderStatesTheModelTimeBase) {
  std::vector<CompareRow> rows = {CompareRowOf(Fixture("nginx-rr", 1, 1.0, 0.01))};
  CompareMeta meta;
  meta.speedup = 20;
  EXPECT_NE(CompareTable(rows, meta).find("model time = wall x 20"), std::string::npos);
  EXPECT_NE(CompareJson(rows, meta).find("model time = wall x 20"), std::string::npos);
}

// The demo's shape: two routers, one concurrency level, the 30 tok/s target met (40 tok/s per
// user), the 50 one not, no CPU tier, no stop rule.
std::vector<CompareRow> DemoRows() {
  workload::RunReport rr = Fixture("nginx-rr", 254, 500.0, 0.025);
  workload::RunReport kv = Fixture("kvroute:predicted_latency", 318, 500.0, 0.025);
  for (workload::RunReport* run : {&rr, &kv}) {
    for (auto& rec : run->levels[0].requests) {
      rec.result.prompt_tokens = 1000;
      rec.result.cached_tokens = run == &kv ? 950 : 640;
    }
  }
  std::vector<CompareRow> rows = {CompareRowOf(rr), CompareRowOf(kv)};
  FillRatios(rows, "nginx-rr");
  return rows;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(CompareTableTest, TheDemoTableFitsOneHundredColumns) {
  CompareMeta meta;
  meta.speedup = 10;
  const std::string table = CompareTable(DemoRows(), meta);
  for (const auto& line : Lines(table)) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_EQ(Lines(table)[1].rfind("nginx-rr ", 0), 0u) << table;
  EXPECT_EQ(Lines(table)[2].rfind("kvroute:predicted_latency ", 0), 0u) << table;
}

TEST(CompareTableTest, ColumnsWithNoValueInAnyRowAreLeftOut) {
  const std::string header = Lines(CompareTable(DemoRows(), CompareMeta{}))[0];
  EXPECT_NE(header.find("gp@30"), std::string::npos) << header;
  EXPECT_NE(header.find("cached"), std::string::npos) << header;
  EXPECT_EQ(header.find("gp@50"), std::string::npos) << header;  // nobody met it
  EXPECT_EQ(header.find("cpu"), std::string::npos) << header;    // no CPU tier
  EXPECT_EQ(header.find("stop"), std::string::npos) << header;   // no sweep stopped
  EXPECT_EQ(header.find("at c"), std::string::npos) << header;   // one concurrency: in the legend
}

TEST(CompareTableTest, TheLegendNamesTheSharedConcurrencyAndOnlyTheColumnsShown) {
  const std::string table = CompareTable(DemoRows(), CompareMeta{});
  EXPECT_NE(table.find("at concurrency 4."), std::string::npos) << table;
  EXPECT_EQ(table.find("gp@50"), std::string::npos) << table;
  EXPECT_EQ(table.find("cpu:"), std::string::npos) << table;
  EXPECT_NE(table.find("compare.json"), std::string::npos) << table;
}

TEST(CompareTableTest, AGoodputTargetThatRepeatsThePreviousOneIsNamedNotShown) {
  // 100 tok/s per user: both targets met, so gp@50 equals gp@30 in every row.
  std::vector<CompareRow> rows = {CompareRowOf(Fixture("nginx-rr", 10, 10.0, 0.01)),
                                  CompareRowOf(Fixture("kvroute:x", 12, 10.0, 0.01))};
  FillRatios(rows, "nginx-rr");
  const std::string table = CompareTable(rows, CompareMeta{});
  EXPECT_EQ(Lines(table)[0].find("gp@50"), std::string::npos) << table;
  EXPECT_NE(table.find("gp@50 = gp@30 in every row."), std::string::npos) << table;
}

TEST(CompareTableTest, ARowWithAValueKeepsItsColumn) {
  std::vector<CompareRow> rows = DemoRows();
  rows[1].external_hit_rate = 0.25;
  rows[0].goodput_at[0] = 8;  // taken at different concurrencies: "at c" is a column
  const std::string header = Lines(CompareTable(rows, CompareMeta{}))[0];
  EXPECT_NE(header.find("cpu"), std::string::npos) << header;
  EXPECT_NE(header.find("at c"), std::string::npos) << header;
}

TEST(CompareChartTest, OneDataLinePerRouterAndAScriptLast) {
  std::vector<CompareRow> rows = {CompareRowOf(Fixture("nginx-rr", 1, 1.0, 0.01)),
                                  CompareRowOf(Fixture("kvroute:x", 1, 1.0, 0.01))};
  auto files = CompareChartFiles(rows, "png");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_NE(files[0].second.find("\"kvroute:x\""), std::string::npos);
  EXPECT_EQ(files[1].first, "compare.gp");
  EXPECT_NE(files[1].second.find("compare.png"), std::string::npos);
}

TEST(CompareChartTest, RouterNamesAreNotEnhancedText) {
  std::vector<CompareRow> rows = {CompareRowOf(Fixture("kvroute:llmd_sticky", 1, 1.0, 0.01))};
  const std::string script = CompareChartFiles(rows, "png").back().second;
  std::size_t terminals = 0, plain = 0;
  for (std::size_t at = script.find("set terminal"); at != std::string::npos;
       at = script.find("set terminal", at + 1)) {
    ++terminals;
    const std::string line = script.substr(at, script.find('\n', at) - at);
    if (line.find("noenhanced") != std::string::npos) ++plain;
  }
  EXPECT_EQ(terminals, 2u);
  EXPECT_EQ(plain, terminals);
}

TEST(ClusterOptionsForTest, ServeGetsTheHeadlineTargetAsAWallTimeItlSlo) {
  CompareOptions o;
  o.cluster.speedup = 10;
  o.out_dir = "out";
  workload::RunReport report;
  report.itl_targets_tps = {30, 50};
  const ClusterOptions c = ClusterOptionsFor(o, report, "kvroute:predicted_latency");
  EXPECT_DOUBLE_EQ(c.itl_slo_s, 1.0 / 30 / 10);  // 33 ms per token in model time
  EXPECT_EQ(c.dir, "out/cluster/kvroute_predicted_latency");
}

TEST(ClusterOptionsForTest, AnExplicitSloOrNoTargetIsLeftAlone) {
  CompareOptions o;
  o.cluster.speedup = 10;
  o.cluster.itl_slo_s = 0.05;
  workload::RunReport report;
  report.itl_targets_tps = {30};
  EXPECT_DOUBLE_EQ(ClusterOptionsFor(o, report, "nginx-rr").itl_slo_s, 0.05);
  o.cluster.itl_slo_s = 0;
  report.itl_targets_tps.clear();
  EXPECT_EQ(ClusterOptionsFor(o, report, "nginx-rr").itl_slo_s, 0);
}

}  // namespace
}  // namespace kvroute::bench
