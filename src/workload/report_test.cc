#include "workload/report.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvroute::workload {
namespace {
namespace json = boost::json;

RequestRecord Ok(double start, double ttft, std::vector<double> itl, std::uint32_t prompt,
                 std::uint32_t cached, int session = 0, int turn = 0) {
  RequestRecord r;
  r.result.ok = true;
  r.result.start_s = start;
  r.result.ttft_s = ttft;
  r.result.itl_s = itl;
  r.result.output_tokens = static_cast<std::uint32_t>(itl.size() + 1);
  r.result.e2e_s = ttft;
  for (double g : itl) r.result.e2e_s += g;
  r.result.prompt_tokens = prompt;
  r.result.cached_tokens = cached;
  r.session = session;
  r.turn = turn;
  return r;
}

RequestRecord Failed(std::string kind) {
  RequestRecord r;
  r.result.ok = false;
  r.result.error_kind = std::move(kind);
  return r;
}

RunReport TwoLevelRun() {
  RunReport run;
  run.label = "kv router";
  run.target = "http://127.0.0.1:1";
  run.workload = "agentic";
  run.gpus = 2;
  run.config = {{"turns", 3.0}, {"tokenizer", std::string("simple")}};
  LevelResult a;
  a.name = "c=1";
  a.concurrency = 1;
  a.duration_s = 2;
  a.hit_rate = 0.5;
  a.requests = {Ok(0, 0.1, {0.01, 0.01}, 100, 0, 0, 0), Ok(1, 0.1, {0.01, 0.01}, 300, 96, 0, 1)};
  LevelResult b;
  b.name = "c=2";
  b.concurrency = 2;
  b.duration_s = 1;
  b.requests = {Ok(0, 0.2, {0.05, 0.05}, 100, 0), Failed("idle_timeout")};
  run.levels = {a, b};
  return run;
}

TEST(SummarizeLevel, CountsTokensRatesAndErrors) {
  RunReport run = TwoLevelRun();
  LevelSummary s = SummarizeLevel(run.levels[0], std::nullopt);
  EXPECT_EQ(s.sent, 2u);
  EXPECT_EQ(s.ok, 2u);
  EXPECT_EQ(s.input_tokens, 400u);
  EXPECT_EQ(s.output_tokens, 6u);
  EXPECT_DOUBLE_EQ(s.input_tokens_per_s, 200);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 3);
  EXPECT_DOUBLE_EQ(*s.client_cached_fraction, 96.0 / 400.0);
  EXPECT_EQ(s.itl.count, 4u);
  LevelSummary f = SummarizeLevel(run.levels[1], std::nullopt);
  EXPECT_EQ(f.failed, 1u);
  EXPECT_EQ(f.errors.at("idle_timeout"), 1u);
  EXPECT_EQ(f.ttft.count, 1u);  // failed requests are not in the latency summaries
}

TEST(RunJson, HoldsEveryLevelAndNullForUnknowns) {
  json::object doc = json::parse(RunJson(TwoLevelRun())).as_object();
  EXPECT_EQ(doc.at("schema").as_string(), "kvroute.bench.run/1");
  EXPECT_EQ(doc.at("label").as_string(), "kv router");
  EXPECT_EQ(doc.at("config").as_object().at("tokenizer").as_string(), "simple");
  const json::array& levels = doc.at("levels").as_array();
  ASSERT_EQ(levels.size(), 2u);
  const json::object& l1 = levels[1].as_object();
  EXPECT_EQ(l1.at("requests").as_object().at("failed").as_int64(), 1);
  EXPECT_EQ(l1.at("requests").as_object().at("errors").as_object().at("idle_timeout").as_int64(),
            1);
  EXPECT_TRUE(l1.at("cache").as_object().at("hit_rate").is_null());
  EXPECT_DOUBLE_EQ(levels[0].as_object().at("cache").as_object().at("hit_rate").as_double(), 0.5);
  EXPECT_TRUE(l1.at("rate_per_s").is_null());
  const json::array& infera = doc.at("goodput").as_object().at("infera").as_array();
  ASSERT_EQ(infera.size(), 2u);  // targets 30 and 50 tok/s/user
  EXPECT_TRUE(doc.at("goodput").as_object().at("distserve").is_null());
}

TEST(RunJson, InferaGoodputPicksHighestConcurrencyMeetingTheTarget) {
  // c=1 has ITL 10 ms (100 tok/s/user), c=2 has 50 ms (20 tok/s/user): only c=1 meets 30.
  json::object doc = json::parse(RunJson(TwoLevelRun())).as_object();
  const json::object& g30 = doc.at("goodput").as_object().at("infera").as_array()[0].as_object();
  EXPECT_EQ(g30.at("at_concurrency").as_int64(), 1);
  // (400 + 6) tokens over 2 s over 2 GPUs.
  EXPECT_DOUBLE_EQ(g30.at("tokens_per_s_per_gpu").as_double(), 406.0 / 2 / 2);
}

TEST(RunJson, SweepIsNullWhenTheStopRuleIsOff) {
  json::object doc = json::parse(RunJson(TwoLevelRun())).as_object();
  const json::object& sweep = doc.at("sweep").as_object();
  EXPECT_TRUE(sweep.at("stop_mean_itl_s").is_null());
  EXPECT_TRUE(sweep.at("stopped_after").is_null());
  EXPECT_TRUE(sweep.at("skipped").as_array().empty());
}

TEST(RunJson, SweepNamesTheLevelThatStoppedItAndTheLevelsNotRun) {
  RunReport run = TwoLevelRun();
  run.stop_mean_itl_s = 0.040;
  run.sweep_stop = SweepStop{.after_level = "c=2", .mean_itl_s = 0.05, .skipped = {4, 8}};
  json::object doc = json::parse(RunJson(run)).as_object();
  const json::object& sweep = doc.at("sweep").as_object();
  EXPECT_DOUBLE_EQ(sweep.at("stop_mean_itl_s").as_double(), 0.040);
  EXPECT_EQ(sweep.at("stopped_after").as_string(), "c=2");
  EXPECT_DOUBLE_EQ(sweep.at("mean_itl_s").as_double(), 0.05);
  ASSERT_EQ(sweep.at("skipped").as_array().size(), 2u);
  EXPECT_EQ(sweep.at("skipped").as_array()[1].as_int64(), 8);
  EXPECT_NE(TerminalTable(run).find("sweep stopped after c=2"), std::string::npos);
}

TEST(LevelsCsv, OneHeaderAndOneRowPerLevel) {
  std::string csv = LevelsCsv(TwoLevelRun());
  std::istringstream in(csv);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(lines[0].starts_with("label,workload,level,concurrency"));
  EXPECT_TRUE(lines[1].starts_with("kv router,agentic,c=1,1,"));
  const auto columns = [](const std::string& l) { return std::count(l.begin(), l.end(), ','); };
  EXPECT_EQ(columns(lines[1]), columns(lines[0]));
  EXPECT_EQ(columns(lines[2]), columns(lines[0]));
}

TEST(RequestsCsv, OneRowPerRequestWithSessionAndTurn) {
  std::string csv = RequestsCsv(TwoLevelRun());
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);  // header + 4 requests
  EXPECT_NE(csv.find("kv router,c=1,0,1,1,,1,"), std::string::npos);
  EXPECT_NE(csv.find(",0,idle_timeout,"), std::string::npos);
}

TEST(RequestsCsv, QuotesFieldsWithCommas) {
  RunReport run = TwoLevelRun();
  run.label = "a,b";
  EXPECT_NE(RequestsCsv(run).find("\"a,b\",c=1"), std::string::npos);
}

TEST(TerminalTable, SimulatedRunsSayTheirTimesAreVirtual) {
  RunReport run = TwoLevelRun();
  run.target = "simulate";
  const std::string t = TerminalTable(run);
  EXPECT_NE(t.find("simulated (virtual) model time"), std::string::npos) << t;
  EXPECT_EQ(t.find("wall clock"), std::string::npos) << t;
}

TEST(TerminalTable, ListsLevelsAndGoodput) {
  std::string t = TerminalTable(TwoLevelRun());
  EXPECT_NE(t.find("c=1"), std::string::npos);
  EXPECT_NE(t.find("c=2"), std::string::npos);
  EXPECT_NE(t.find("goodput (Infera, 30 tok/s/user)"), std::string::npos);
}

TEST(TerminalTable, PrintsHitRateByTierOnlyForLevelsThatHaveIt) {
  RunReport run = TwoLevelRun();
  EXPECT_EQ(TerminalTable(run).find("hit rate by tier"), std::string::npos);
  run.levels[1].tier_hit_rate = std::array<double, 4>{0.5, 0.25, 0.125, 0.0625};
  const std::string t = TerminalTable(run);
  EXPECT_NE(t.find("hit rate by tier, c=2: GPU 0.500, CPU 0.250, DISK 0.125, SHARED 0.062"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("hit rate by tier, c=1"), std::string::npos) << t;
}

TEST(FileStem, ReplacesUnsafeCharacters) {
  EXPECT_EQ(FileStem("kv router/v2"), "kv_router_v2");
  EXPECT_EQ(FileStem(""), "run");
}

TEST(WriteRunFiles, WritesJsonAndBothCsvs) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kvroute_report_test_" + std::to_string(::getpid()));
  ASSERT_TRUE(WriteRunFiles(TwoLevelRun(), dir.string()).has_value());
  EXPECT_TRUE(std::filesystem::exists(dir / "kv_router.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "kv_router_levels.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "kv_router_requests.csv"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvroute::workload
