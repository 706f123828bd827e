#include "bench/plot.h"

#include <gtest/gtest.h>

namespace kvroute::bench {
namespace {

workload::RunReport SampleRun() {
  workload::RunReport run;
  run.label = "kv";
  run.workload = "agentic";
  for (int c : {1, 4}) {
    workload::LevelResult l;
    l.name = "c=" + std::to_string(c);
    l.concurrency = c;
    l.duration_s = 1;
    l.hit_rate = 0.25 * c;
    for (int i = 0; i < 10; ++i) {
      workload::RequestRecord r;
      r.result.ok = true;
      r.result.ttft_s = 0.1 * (i + 1);
      r.result.itl_s = {0.01, 0.02};
      r.result.output_tokens = 3;
      r.result.prompt_tokens = 10;
      l.requests.push_back(r);
    }
    run.levels.push_back(l);
  }
  return run;
}

const PlotFile* Find(const std::vector<PlotFile>& files, const std::string& name) {
  for (const PlotFile& f : files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(MakePlotFiles, WritesDataFilesAndOneScriptLast) {
  auto files = MakePlotFiles(SampleRun(), "pngcairo");
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files.back().name, "kv_plots.gp");
  EXPECT_NE(Find(files, "kv_throughput.dat"), nullptr);
  EXPECT_NE(Find(files, "kv_ttft_cdf.dat"), nullptr);
  EXPECT_NE(Find(files, "kv_itl_cdf.dat"), nullptr);
}

TEST(MakePlotFiles, ScriptRendersEveryChartAsPngAndSvg) {
  const std::string gp = MakePlotFiles(SampleRun(), "pngcairo").back().content;
  for (const char* chart : {"throughput", "ttft_cdf", "itl_cdf", "hit_rate"}) {
    EXPECT_NE(gp.find(std::string("kv_") + chart + ".png"), std::string::npos) << chart;
    EXPECT_NE(gp.find(std::string("kv_") + chart + ".svg"), std::string::npos) << chart;
  }
  EXPECT_NE(gp.find("set terminal pngcairo"), std::string::npos);
  EXPECT_NE(gp.find("set terminal svg"), std::string::npos);
  EXPECT_EQ(MakePlotFiles(SampleRun(), "png").back().content.find("pngcairo"), std::string::npos);
}

TEST(MakePlotFiles, CdfHasOneBlockPerLevelEndingAtOne) {
  auto files = MakePlotFiles(SampleRun(), "png");
  const std::string& ttft = Find(files, "kv_ttft_cdf.dat")->content;
  EXPECT_NE(ttft.find("# c=1\n0.1 0.1\n"), std::string::npos);
  EXPECT_NE(ttft.find("# c=4\n"), std::string::npos);
  EXPECT_NE(ttft.find("1 1\n"), std::string::npos);  // the largest TTFT at fraction 1
}

TEST(MakePlotFiles, CdfIsThinnedToTheCap) {
  auto files = MakePlotFiles(SampleRun(), "png", /*max_cdf_points=*/3);
  const std::string& ttft = Find(files, "kv_ttft_cdf.dat")->content;
  const auto first_block = ttft.substr(0, ttft.find("\n\n"));
  EXPECT_LE(std::count(first_block.begin(), first_block.end(), '\n'), 1 + 4 + 1);
}

TEST(MakePlotFiles, ThroughputRowsFollowLevels) {
  auto files = MakePlotFiles(SampleRun(), "png");
  const std::string& t = Find(files, "kv_throughput.dat")->content;
  EXPECT_NE(t.find("\n1 100 30 130 0.250000 c=1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\n4 100 30 130 1.000000 c=4\n"), std::string::npos) << t;
}

}  // namespace
}  // namespace kvroute::bench
