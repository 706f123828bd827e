#include "telemetry/vllm_metrics.h"

#include <prometheus/family.h>

#include <cmath>

namespace kvroute::telemetry {
namespace vllm_buckets {

std::vector<double> TimeToFirstToken() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> InterTokenLatency() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}

std::vector<double> RequestLatency() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::vector<double> IterationTokens() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
}

std::vector<double> OneTwoFive(std::uint64_t max) {
  std::vector<double> out;
  const double mantissas[] = {1, 2, 5};
  for (double exponent = 1;; exponent *= 10) {
    for (double m : mantissas) {
      double v = m * exponent;
      if (v > static_cast<double>(max)) return out;
      out.push_back(v);
    }
  }
}

}  // namespace vllm_buckets

namespace {

using prometheus::Labels;

prometheus::Gauge& AddGauge(prometheus::Registry& r, const std::string& name,
                            const std::string& help, const Labels& labels) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(labels);
}

prometheus::Counter& AddCounter(prometheus::Registry& r, const std::string& name,
                                const std::string& help, const Labels& labels) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels);
}

prometheus::Histogram& AddHistogram(prometheus::Registry& r, const std::string& name,
                                    const std::string& help, const Labels& labels,
                                    std::vector<double> buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(labels,
                                                                            std::move(buckets));
}

Labels Base(const VllmMetricLabels& l) {
  return {{"model_name", l.model_name}, {"engine", l.engine}};
}

}  // namespace

namespace b = vllm_buckets;

VllmMetrics::VllmMetrics(prometheus::Registry& registry, const VllmMetricLabels& labels,
                         std::uint64_t max_model_len)
    : num_requests_running(AddGauge(registry, "vllm:num_requests_running",
                                    "Number of requests in model execution batches.",
                                    Base(labels))),
      num_requests_waiting(AddGauge(registry, "vllm:num_requests_waiting",
                                    "Number of requests waiting to be processed.", Base(labels))),
      kv_cache_usage_perc(AddGauge(registry, "vllm:kv_cache_usage_perc",
                                   "KV-cache usage. 1 means 100 percent usage.", Base(labels))),
      prefix_cache_queries(AddCounter(registry, "vllm:prefix_cache_queries_total",
                                      "Prefix cache queries, in terms of number of queried tokens.",
                                      Base(labels))),
      prefix_cache_hits(AddCounter(registry, "vllm:prefix_cache_hits_total",
                                   "Prefix cache hits, in terms of number of cached tokens.",
                                   Base(labels))),
      prompt_tokens(AddCounter(registry, "vllm:prompt_tokens_total",
                               "Number of prefill tokens processed.", Base(labels))),
      generation_tokens(AddCounter(registry, "vllm:generation_tokens_total",
                                   "Number of generation tokens processed.", Base(labels))),
      num_preemptions(AddCounter(registry, "vllm:num_preemptions_total",
                                 "Cumulative number of preemption from the engine.", Base(labels))),
      time_to_first_token(AddHistogram(registry, "vllm:time_to_first_token_seconds",
                                       "Histogram of time to first token in seconds.", Base(labels),
                                       b::TimeToFirstToken())),
      inter_token_latency(AddHistogram(registry, "vllm:inter_token_latency_seconds",
                                       "Histogram of inter-token latency in seconds.", Base(labels),
                                       b::InterTokenLatency())),
      request_time_per_output_token(
          AddHistogram(registry, "vllm:request_time_per_output_token_seconds",
                       "Histogram of time_per_output_token_seconds per request.", Base(labels),
                       b::InterTokenLatency())),
      e2e_request_latency(AddHistogram(registry, "vllm:e2e_request_latency_seconds",
                                       "Histogram of e2e request latency in seconds.", Base(labels),
                                       b::RequestLatency())),
      request_queue_time(AddHistogram(registry, "vllm:request_queue_time_seconds",
                                      "Histogram of time spent in WAITING phase for request.",
                                      Base(labels), b::RequestLatency())),
      request_inference_time(AddHistogram(registry, "vllm:request_inference_time_seconds",
                                          "Histogram of time spent in RUNNING phase for request.",
                                          Base(labels), b::RequestLatency())),
      request_prefill_time(AddHistogram(registry, "vllm:request_prefill_time_seconds",
                                        "Histogram of time spent in PREFILL phase for request.",
                                        Base(labels), b::RequestLatency())),
      request_decode_time(AddHistogram(registry, "vllm:request_decode_time_seconds",
                                       "Histogram of time spent in DECODE phase for request.",
                                       Base(labels), b::RequestLatency())),
      request_prompt_tokens(AddHistogram(registry, "vllm:request_prompt_tokens",
                                         "Number of prefill tokens processed.", Base(labels),
                                         b::OneTwoFive(max_model_len))),
      request_generation_tokens(AddHistogram(registry, "vllm:request_generation_tokens",
                                             "Number of generation tokens processed.", Base(labels),
                                             b::OneTwoFive(max_model_len))),
      request_params_max_tokens(AddHistogram(registry, "vllm:request_params_max_tokens",
                                             "Histogram of the max_tokens request parameter.",
                                             Base(labels), b::OneTwoFive(max_model_len))),
      iteration_tokens(AddHistogram(registry, "vllm:iteration_tokens_total",
                                    "Histogram of number of tokens per engine_step.", Base(labels),
                                    b::IterationTokens())),
      registry_(registry),
      labels_(labels) {
  auto& family = prometheus::BuildCounter()
                     .Name("vllm:request_success_total")
                     .Help("Count of successfully processed requests.")
                     .Register(registry_);
  for (std::string_view reason : kFinishedReasons) {
    Labels l = Base(labels_);
    l["finished_reason"] = std::string(reason);
    success_.emplace(std::string(reason), &family.Add(l));
  }
}

prometheus::Counter& VllmMetrics::RequestSuccess(std::string_view finished_reason) {
  auto it = success_.find(finished_reason);
  if (it == success_.end()) it = success_.find("error");
  return *it->second;
}

void VllmMetrics::SetCacheConfigInfo(const std::map<std::string, std::string>& attributes) {
  Labels l(attributes.begin(), attributes.end());
  l["engine"] = labels_.engine;
  AddGauge(registry_, "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", l)
      .Set(1);
}

void VllmMetrics::AdvanceTo(prometheus::Counter& counter, double total) {
  double delta = total - counter.Value();
  if (delta > 0) counter.Increment(delta);
}

}  // namespace kvroute::telemetry
