#include "telemetry/vllm_metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "telemetry/prometheus_text.h"

namespace kvroute::telemetry {
namespace {

bool Has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

class VllmMetricsTest : public ::testing::Test {
 protected:
  prometheus::Registry registry_;
  VllmMetrics metrics_{registry_, {.model_name = "m", .engine = "0"}, 1000};
};

TEST_F(VllmMetricsTest, ExposesEveryFamilyWithVllmNameAndType) {
  std::string text = ExposeText(registry_);
  for (const char* line : {
           "# TYPE vllm:num_requests_running gauge",
           "# TYPE vllm:num_requests_waiting gauge",
           "# TYPE vllm:kv_cache_usage_perc gauge",
           "# TYPE vllm:prefix_cache_queries_total counter",
           "# TYPE vllm:prefix_cache_hits_total counter",
           "# TYPE vllm:prompt_tokens_total counter",
           "# TYPE vllm:generation_tokens_total counter",
           "# TYPE vllm:num_preemptions_total counter",
           "# TYPE vllm:request_success_total counter",
           "# TYPE vllm:time_to_first_token_seconds histogram",
           "# TYPE vllm:inter_token_latency_seconds histogram",
           "# TYPE vllm:e2e_request_latency_seconds histogram",
           "# TYPE vllm:request_prompt_tokens histogram",
           "# TYPE vllm:iteration_tokens_total histogram",
       }) {
    EXPECT_TRUE(Has(text, line)) << line;
  }
}

TEST_F(VllmMetricsTest, SeriesCarryModelNameAndEngineLabels) {
  metrics_.num_requests_running.Set(3);
  std::string text = ExposeText(registry_);
  EXPECT_TRUE(Has(text, "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3"));
}

TEST_F(VllmMetricsTest, CounterNamesAreNotSuffixedTwice) {
  metrics_.prompt_tokens.Increment(5);
  std::string text = ExposeText(registry_);
  EXPECT_TRUE(Has(text, "vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 5"));
  EXPECT_FALSE(Has(text, "_total_total"));
}

TEST_F(VllmMetricsTest, TtftHistogramUsesVllmBuckets) {
  metrics_.time_to_first_token.Observe(0.03);
  std::string text = ExposeText(registry_);
  EXPECT_TRUE(
      Has(text,
          "vllm:time_to_first_token_seconds_bucket{engine=\"0\",model_name=\"m\",le=\"0.02\"} 0"));
  EXPECT_TRUE(
      Has(text,
          "vllm:time_to_first_token_seconds_bucket{engine=\"0\",model_name=\"m\",le=\"0.04\"} 1"));
  EXPECT_TRUE(Has(text, "le=\"2560\""));
  EXPECT_TRUE(Has(text, "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} 1"));
}

TEST_F(VllmMetricsTest, RequestSuccessIsPreRegisteredPerFinishReason) {
  metrics_.RequestSuccess("length").Increment();
  metrics_.RequestSuccess("bogus").Increment();
  std::string text = ExposeText(registry_);
  EXPECT_TRUE(Has(text, "finished_reason=\"stop\",model_name=\"m\"} 0"));
  EXPECT_TRUE(Has(text, "finished_reason=\"length\",model_name=\"m\"} 1"));
  EXPECT_TRUE(Has(text, "finished_reason=\"error\",model_name=\"m\"} 1"));
}

TEST_F(VllmMetricsTest, CacheConfigInfoIsAGaugeOfOneWithConfigLabels) {
  metrics_.SetCacheConfigInfo({{"block_size", "16"}, {"num_gpu_blocks", "1024"}});
  std::string text = ExposeText(registry_);
  EXPECT_TRUE(Has(text, "# TYPE vllm:cache_config_info gauge"));
  EXPECT_TRUE(Has(
      text, "vllm:cache_config_info{block_size=\"16\",engine=\"0\",num_gpu_blocks=\"1024\"} 1"));
}

TEST_F(VllmMetricsTest, AdvanceToMovesACounterUpButNeverDown) {
  VllmMetrics::AdvanceTo(metrics_.generation_tokens, 10);
  VllmMetrics::AdvanceTo(metrics_.generation_tokens, 4);
  EXPECT_EQ(metrics_.generation_tokens.Value(), 10);
}

TEST(VllmBucketsTest, OneTwoFiveStopsAtTheLargestValueNotAboveMax) {
  EXPECT_EQ(vllm_buckets::OneTwoFive(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(vllm_buckets::OneTwoFive(4), (std::vector<double>{1, 2}));
}

}  // namespace
}  // namespace kvroute::telemetry
