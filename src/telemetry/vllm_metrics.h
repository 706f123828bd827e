// VllmMetrics: vLLM V1's Prometheus metric families with vLLM's exact names, types, labels
// and histogram buckets (shared/reference/vllm-protocol.md §3), so that anything that scrapes
// a vLLM server (the Gateway API Inference Extension EPP, llm-d, kvroute's own scraper,
// Grafana dashboards) reads `kvroute sim` unchanged.
//
// Names: vLLM registers counters without `_total` and prometheus_client appends it; here
// the exposed name is written out in full (`vllm:prompt_tokens_total`). Every series carries
// `model_name` (served model name) and `engine` (engine / data-parallel index, "0").
// `_created` samples of prometheus_client are not emitted.
//
// Ownership: the families live in the registry passed in; VllmMetrics holds references into
// it, so the registry must outlive it.
// Thread safety: every metric is safe to update from any thread (prometheus-cpp metrics
// are atomic or internally locked). SetCacheConfigInfo must be called once, at start-up.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::telemetry {

// vLLM's bucket layouts (vllm/v1/metrics/loggers.py).
namespace vllm_buckets {
std::vector<double> TimeToFirstToken();   // 0.001 … 2560 s
std::vector<double> InterTokenLatency();  // 0.01 … 80 s (also per-request TPOT)
std::vector<double> RequestLatency();     // 0.3 … 7680 s (e2e, queue, prefill, decode, …)
std::vector<double> IterationTokens();    // 1, 8, 16, … 16384 tokens per step
// 1, 2, 5, 10, 20, 50, … up to and including the largest value ≤ max (build_1_2_5_buckets).
std::vector<double> OneTwoFive(std::uint64_t max);
}  // namespace vllm_buckets

struct VllmMetricLabels {
  std::string model_name;    // the served model name
  std::string engine = "0";  // engine index (data-parallel rank)
};

// The finish reasons vLLM pre-registers for request_success.
inline constexpr std::string_view kFinishedReasons[] = {"stop", "length", "abort", "error"};

class VllmMetrics {
 public:
  VllmMetrics(prometheus::Registry& registry, const VllmMetricLabels& labels,
              std::uint64_t max_model_len);

  // Scheduler state (gauges).
  prometheus::Gauge& num_requests_running;
  prometheus::Gauge& num_requests_waiting;
  prometheus::Gauge& kv_cache_usage_perc;  // 0..1

  // Counters (tokens unless said otherwise).
  prometheus::Counter& prefix_cache_queries;
  prometheus::Counter& prefix_cache_hits;
  prometheus::Counter& prompt_tokens;
  prometheus::Counter& generation_tokens;
  prometheus::Counter& num_preemptions;  // preemption events

  // Per-request histograms (seconds unless said otherwise).
  prometheus::Histogram& time_to_first_token;
  prometheus::Histogram& inter_token_latency;
  prometheus::Histogram& request_time_per_output_token;
  prometheus::Histogram& e2e_request_latency;
  prometheus::Histogram& request_queue_time;
  prometheus::Histogram& request_inference_time;
  prometheus::Histogram& request_prefill_time;
  prometheus::Histogram& request_decode_time;
  prometheus::Histogram& request_prompt_tokens;      // tokens
  prometheus::Histogram& request_generation_tokens;  // tokens
  prometheus::Histogram& request_params_max_tokens;  // tokens
  prometheus::Histogram& iteration_tokens;           // tokens per engine step

  // request_success_total{finished_reason}; unknown reasons count as "error".
  prometheus::Counter& RequestSuccess(std::string_view finished_reason);

  // vllm:cache_config_info = 1 with these labels (plus model_name is NOT added, as vLLM;
  // `engine` is). Call once.
  void SetCacheConfigInfo(const std::map<std::string, std::string>& attributes);

  // Moves a counter that mirrors a monotone external total (engine stats) up to `total`.
  static void AdvanceTo(prometheus::Counter& counter, double total);

 private:
  prometheus::Registry& registry_;
  VllmMetricLabels labels_;
  std::map<std::string, prometheus::Counter*, std::less<>> success_;
};

}  // namespace kvroute::telemetry
