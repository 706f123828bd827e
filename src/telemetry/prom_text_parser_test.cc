#include "telemetry/prom_text_parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "telemetry/prometheus_text.h"
#include "telemetry/vllm_metrics.h"

namespace kvroute::telemetry {
namespace {

// Shaped like vLLM 0.10's /metrics (prometheus_client output).
constexpr std::string_view kVllmText =
    R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-32B"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-32B"} 7.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-32B"} 0.4125
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-32B"} 12345.0
vllm:prefix_cache_queries_created{engine="0",model_name="Qwen/Qwen3-32B"} 1.7e+09
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",num_cpu_blocks="0",num_gpu_blocks="8192"} 1.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.52
)";

TEST(PromTextParserTest, ParsesVllmShapedExpositionWithoutErrors) {
  PromScrape s = ParsePromText(kVllmText);
  EXPECT_TRUE(s.errors.empty()) << s.errors.front().message;
  EXPECT_EQ(s.samples.size(), 10u);
  const PromSample* running = s.First("vllm:num_requests_running");
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->value, 3.0);
  ASSERT_NE(running->Label("model_name"), nullptr);
  EXPECT_EQ(*running->Label("model_name"), "Qwen/Qwen3-32B");
  EXPECT_EQ(running->Label("missing"), nullptr);
  const PromSample* info = s.First("vllm:cache_config_info");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(*info->Label("num_gpu_blocks"), "8192");
  EXPECT_EQ(*info->Label("block_size"), "16");
}

TEST(PromTextParserTest, TypesApplyToSuffixedSampleNames) {
  PromScrape s = ParsePromText(kVllmText);
  EXPECT_EQ(s.TypeOf("vllm:num_requests_waiting"), PromType::kGauge);
  EXPECT_EQ(s.TypeOf("vllm:prefix_cache_queries_total"), PromType::kCounter);
  EXPECT_EQ(s.TypeOf("vllm:time_to_first_token_seconds_bucket"), PromType::kHistogram);
  EXPECT_EQ(s.TypeOf("vllm:time_to_first_token_seconds_sum"), PromType::kHistogram);
  EXPECT_EQ(s.TypeOf("nothing_here"), PromType::kUntyped);
  EXPECT_EQ(s.help.at("vllm:num_requests_running"),
            "Number of requests in model execution batches.");
}

TEST(PromTextParserTest, InfinityLabelAndValueSpellings) {
  PromScrape s = ParsePromText("a +Inf\nb -Inf\nc NaN\nd{le=\"+Inf\"} 1e3\ne Inf\n");
  ASSERT_TRUE(s.errors.empty());
  ASSERT_EQ(s.samples.size(), 5u);
  EXPECT_TRUE(std::isinf(s.samples[0].value) && s.samples[0].value > 0);
  EXPECT_TRUE(std::isinf(s.samples[1].value) && s.samples[1].value < 0);
  EXPECT_TRUE(std::isnan(s.samples[2].value));
  EXPECT_EQ(s.samples[3].value, 1000.0);
  EXPECT_EQ(*s.samples[3].Label("le"), "+Inf");
  EXPECT_TRUE(std::isinf(s.samples[4].value));
}

TEST(PromTextParserTest, UnescapesLabelValues) {
  PromScrape s = ParsePromText(R"(m{path="C:\\dir",quote="say \"hi\"",nl="a\nb",odd="x\q"} 1)");
  ASSERT_TRUE(s.errors.empty()) << s.errors.front().message;
  ASSERT_EQ(s.samples.size(), 1u);
  EXPECT_EQ(*s.samples[0].Label("path"), "C:\\dir");
  EXPECT_EQ(*s.samples[0].Label("quote"), "say \"hi\"");
  EXPECT_EQ(*s.samples[0].Label("nl"), "a\nb");
  EXPECT_EQ(*s.samples[0].Label("odd"), "x\\q");
}

TEST(PromTextParserTest, ReadsTimestampsAndTrailingCommaAndCrLf) {
  PromScrape s = ParsePromText("x{a=\"1\",} 2 1700000000123\r\ny 3\r\n");
  ASSERT_TRUE(s.errors.empty()) << s.errors.front().message;
  ASSERT_EQ(s.samples.size(), 2u);
  ASSERT_TRUE(s.samples[0].timestamp_ms.has_value());
  EXPECT_EQ(*s.samples[0].timestamp_ms, 1700000000123);
  EXPECT_FALSE(s.samples[1].timestamp_ms.has_value());
  EXPECT_EQ(s.samples[1].value, 3);
}

TEST(PromTextParserTest, SumAddsEveryLabelSet) {
  PromScrape s = ParsePromText("q{engine=\"0\"} 2\nq{engine=\"1\"} 5\nr 1\n");
  EXPECT_EQ(s.Sum("q"), 7.0);
  EXPECT_EQ(s.Find("q").size(), 2u);
  EXPECT_FALSE(s.Sum("absent").has_value());
}

TEST(PromTextParserTest, BadLinesAreReportedWithLineNumbersAndSkipped) {
  PromScrape s = ParsePromText(
      "good 1\n"
      "9bad 1\n"
      "novalue\n"
      "x{a=\"unterminated} 1\n"
      "y{a=\"1\" b=\"2\"} 1\n"
      "z 1 notatime\n"
      "w abc\n"
      "# TYPE t bogus\n"
      "v{a=\"1\",a=\"2\"} 1\n"
      "also_good{l=\"v\"} 2\n");
  ASSERT_EQ(s.samples.size(), 2u);
  EXPECT_EQ(s.samples[0].name, "good");
  EXPECT_EQ(s.samples[1].name, "also_good");
  ASSERT_EQ(s.errors.size(), 8u);
  EXPECT_EQ(s.errors[0].line, 2u);
  EXPECT_EQ(s.errors[7].line, 9u);
}

TEST(PromTextParserTest, KeepsAtMostMaxErrorsAndCountsTheRest) {
  std::string text;
  for (std::size_t i = 0; i < kMaxErrors + 25; ++i) text += "!!!\n";
  PromScrape s = ParsePromText(text);
  EXPECT_EQ(s.errors.size(), kMaxErrors);
  EXPECT_EQ(s.errors_dropped, 25u);
}

TEST(PromTextParserTest, RandomGarbageNeverCrashes) {
  std::mt19937 rng(7);
  const std::string alphabet = "ab:_{}=\",\\\n #\t+-.e9InfNaTYPE\r";
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::size_t parsed_lines = 0;
  for (int round = 0; round < 2000; ++round) {
    std::string text(static_cast<std::size_t>(round % 200), ' ');
    for (char& c : text) c = alphabet[pick(rng)];
    PromScrape s = ParsePromText(text);
    parsed_lines += s.samples.size() + s.errors.size();
    for (const PromSample& sample : s.samples) EXPECT_FALSE(sample.name.empty());
  }
  EXPECT_GT(parsed_lines, 0u);
}

TEST(PromTextParserTest, ParsesOurOwnVllmMetricsExposition) {
  prometheus::Registry registry;
  VllmMetrics metrics(registry, {.model_name = "sim-model", .engine = "0"}, 4096);
  metrics.num_requests_waiting.Set(4);
  metrics.num_requests_running.Set(2);
  metrics.kv_cache_usage_perc.Set(0.25);
  metrics.prefix_cache_queries.Increment(100);
  metrics.prefix_cache_hits.Increment(60);
  metrics.time_to_first_token.Observe(0.2);
  metrics.SetCacheConfigInfo({{"block_size", "16"}, {"num_gpu_blocks", "1000"}});
  PromScrape s = ParsePromText(ExposeText(registry));
  EXPECT_TRUE(s.errors.empty()) << s.errors.front().message;
  EXPECT_EQ(s.Sum("vllm:num_requests_waiting"), 4.0);
  EXPECT_EQ(s.Sum("vllm:num_requests_running"), 2.0);
  EXPECT_EQ(s.Sum("vllm:kv_cache_usage_perc"), 0.25);
  EXPECT_EQ(s.Sum("vllm:prefix_cache_hits_total"), 60.0);
  EXPECT_EQ(s.TypeOf("vllm:time_to_first_token_seconds_bucket"), PromType::kHistogram);
  const PromSample* info = s.First("vllm:cache_config_info");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(*info->Label("num_gpu_blocks"), "1000");
}

}  // namespace
}  // namespace kvroute::telemetry
