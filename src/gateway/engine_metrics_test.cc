#include "gateway/engine_metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>

#include "net/http_server.h"

namespace kvroute::gateway {
namespace {

using std::chrono::seconds;

EngineMetrics Extract(std::string_view text, Nanos at = seconds(5)) {
  return ExtractEngineMetrics(telemetry::ParsePromText(text), at);
}

constexpr std::string_view kVllm = R"(# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 400.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_cpu_blocks="2048",num_gpu_blocks="8192"} 1.0
)";

TEST(EngineMetricsTest, ReadsVllmNames) {
  EngineMetrics m = Extract(kVllm);
  EXPECT_EQ(m.kind, EngineKind::kVllm);
  EXPECT_EQ(m.num_running, 3u);
  EXPECT_EQ(m.num_waiting, 7u);
  EXPECT_EQ(m.kv_usage, 0.5);
  EXPECT_EQ(m.prefix_cache_queries, 1000.0);
  EXPECT_EQ(m.prefix_cache_hits, 400.0);
  EXPECT_EQ(m.block_size, 16u);
  EXPECT_EQ(m.num_gpu_blocks, 8192u);
  EXPECT_EQ(m.num_cpu_blocks, 2048u);
  EXPECT_EQ(m.parse_errors, 0u);
}

TEST(EngineMetricsTest, ReadsTheOffloadConnectorsLoadsIntoGpuPerTier) {
  // vLLM's OffloadingConnector counters (offloading/metrics.py): loads are "<medium>_to_GPU";
  // stores (GPU_to_CPU) are not loads; two DP engines' series add up.
  std::string text(kVllm);
  text += R"(# TYPE vllm:kv_offload_total_bytes counter
vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="CPU_to_GPU"} 2.5e10
vllm:kv_offload_total_bytes_total{engine="1",model_name="m",transfer_type="CPU_to_GPU"} 1.5e10
vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 9e10
vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="SHARED_STORAGE_to_GPU"} 5e9
# TYPE vllm:kv_offload_total_time counter
vllm:kv_offload_total_time_total{engine="0",model_name="m",transfer_type="CPU_to_GPU"} 1.0
vllm:kv_offload_total_time_total{engine="1",model_name="m",transfer_type="CPU_to_GPU"} 0.6
vllm:kv_offload_total_time_total{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 4.0
vllm:kv_offload_total_time_total{engine="0",model_name="m",transfer_type="SHARED_STORAGE_to_GPU"} NaN
)";
  EngineMetrics m = Extract(text);
  constexpr int kCpu = static_cast<int>(Tier::kCpu), kShared = static_cast<int>(Tier::kShared);
  EXPECT_EQ(m.tier_load_bytes_sum[kCpu], 4e10);
  EXPECT_EQ(m.tier_load_seconds_sum[kCpu], 1.6);
  EXPECT_EQ(m.tier_load_bytes_sum[kShared], 5e9);
  EXPECT_FALSE(m.tier_load_seconds_sum[kShared].has_value());  // NaN spoils the tier
  EXPECT_FALSE(m.tier_load_bytes_sum[0].has_value());  // GPU_to_CPU is a store
  EXPECT_FALSE(Extract(kVllm).tier_load_bytes_sum[kCpu].has_value());  // no connector
}

TEST(EngineMetricsTest, FallsBackToTheOldGpuCacheUsageName) {
  EngineMetrics m =
      Extract("vllm:num_requests_running 1\nvllm:gpu_cache_usage_perc{engine=\"0\"} 0.25\n");
  EXPECT_EQ(m.kv_usage, 0.25);
  EXPECT_FALSE(m.block_size.has_value());
}

TEST(EngineMetricsTest, ReadsSglangNames) {
  EngineMetrics m = Extract(
      "sglang:num_queue_reqs{model_name=\"m\"} 4\n"
      "sglang:num_running_reqs{model_name=\"m\"} 9\n"
      "sglang:token_usage{model_name=\"m\"} 0.75\n"
      "sglang:cache_config_info{page_size=\"64\",num_pages=\"1000\"} 1\n");
  EXPECT_EQ(m.kind, EngineKind::kSglang);
  EXPECT_EQ(m.num_waiting, 4u);
  EXPECT_EQ(m.num_running, 9u);
  EXPECT_EQ(m.kv_usage, 0.75);
  EXPECT_EQ(m.block_size, 64u);
  EXPECT_EQ(m.num_gpu_blocks, 1000u);
}

TEST(EngineMetricsTest, SumsCountsAndAveragesUsageOverDataParallelEngines) {
  EngineMetrics m = Extract(
      "vllm:num_requests_waiting{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"1\"} 3\n"
      "vllm:kv_cache_usage_perc{engine=\"0\"} 0.2\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.6\n");
  EXPECT_EQ(m.num_waiting, 5u);
  EXPECT_NEAR(*m.kv_usage, 0.4, 1e-12);
}

TEST(EngineMetricsTest, BadValuesAreLeftEmptyAndGarbageIsCounted) {
  EngineMetrics m = Extract(
      "vllm:num_requests_waiting NaN\nvllm:num_requests_running -1\n"
      "vllm:kv_cache_usage_perc +Inf\n"
      "vllm:cache_config_info{block_size=\"x16\",num_gpu_blocks=\"\"} 1\n"
      "garbage line here\n");
  EXPECT_EQ(m.kind, EngineKind::kVllm);
  EXPECT_FALSE(m.num_waiting.has_value());
  EXPECT_FALSE(m.num_running.has_value());
  EXPECT_FALSE(m.kv_usage.has_value());
  EXPECT_FALSE(m.block_size.has_value());
  EXPECT_FALSE(m.num_gpu_blocks.has_value());
  EXPECT_EQ(m.parse_errors, 1u);
}

TEST(EngineMetricsTest, AnUnknownServerYieldsNothing) {
  EngineMetrics m = Extract("process_cpu_seconds_total 12\n");
  EXPECT_EQ(m.kind, EngineKind::kUnknown);
  EXPECT_FALSE(m.num_waiting.has_value());
}

TEST(EngineMetricsTest, AgeIsMeasuredFromTheScrapeTime) {
  EngineMetrics m = Extract(kVllm, seconds(5));
  EXPECT_DOUBLE_EQ(m.AgeSeconds(seconds(7)), 2.0);
  EXPECT_DOUBLE_EQ(m.AgeSeconds(seconds(4)), 0.0);
  sched::ScrapedMetrics s = m.ToScraped(seconds(8));
  EXPECT_DOUBLE_EQ(s.age_s, 3.0);
  EXPECT_EQ(s.num_waiting, 7u);
  EXPECT_EQ(s.kv_usage, 0.5);
}

TEST(EngineMetricsScraperTest, ScrapesEachTargetAndReportsErrors) {
  net::HttpServer server({.threads = 1});
  server.Handle("GET", "/metrics", [](const net::HttpRequest&) -> net::HandlerResult {
    return net::TextResponse(200, std::string(kVllm));
  });
  ASSERT_TRUE(server.Start().has_value());
  ManualClock clock;
  clock.Set(seconds(42));
  std::mutex mu;
  std::map<WorkerId, std::expected<EngineMetrics, std::string>> got;
  EngineMetricsScraper scraper(
      {.timeout = std::chrono::milliseconds(2000)},
      [&] {
        return std::vector<ScrapeTarget>{{1, "http://127.0.0.1:" + std::to_string(server.port())},
                                         {2, "http://127.0.0.1:1"},
                                         {3, "not a url"}};
      },
      [&](WorkerId w, std::expected<EngineMetrics, std::string> r) {
        std::lock_guard lock(mu);
        got.insert_or_assign(w, std::move(r));
      },
      &clock);
  scraper.RunOnce();
  server.Shutdown(std::chrono::milliseconds(0));
  std::lock_guard lock(mu);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_TRUE(got.at(1).has_value()) << got.at(1).error();
  EXPECT_EQ(got.at(1)->num_waiting, 7u);
  EXPECT_EQ(got.at(1)->scraped_at, seconds(42));
  EXPECT_FALSE(got.at(2).has_value());
  EXPECT_FALSE(got.at(3).has_value());
}

}  // namespace
}  // namespace kvroute::gateway
