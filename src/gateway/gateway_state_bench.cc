// CPU cost of the gateway's per-scrape path: parsing a vLLM-sized /metrics body and extracting
// engine metrics. The router state's per-request costs: fleet/router_state_bench.cc.
#include <benchmark/benchmark.h>

#include <string>

#include "gateway/engine_metrics.h"
#include "telemetry/prom_text_parser.h"
#include "telemetry/prometheus_text.h"
#include "telemetry/vllm_metrics.h"

namespace kvroute::gateway {
namespace {

// What `kvroute sim` serves: vLLM's families with a few observations in every histogram.
std::string SimExposition() {
  prometheus::Registry registry;
  telemetry::VllmMetrics m(registry, {.model_name = "Qwen/Qwen3-32B"}, 32768);
  m.num_requests_waiting.Set(3);
  m.num_requests_running.Set(17);
  m.kv_cache_usage_perc.Set(0.42);
  for (int i = 0; i < 10; ++i) {
    m.time_to_first_token.Observe(0.1 * i);
    m.inter_token_latency.Observe(0.02 * i);
    m.e2e_request_latency.Observe(1.0 * i);
    m.request_prompt_tokens.Observe(100.0 * i);
  }
  m.SetCacheConfigInfo({{"block_size", "16"}, {"num_gpu_blocks", "8192"}});
  return telemetry::ExposeText(registry);
}

void BM_ParseSimMetrics(benchmark::State& state) {
  const std::string text = SimExposition();
  for (auto _ : state) benchmark::DoNotOptimize(telemetry::ParsePromText(text));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_ParseSimMetrics);

void BM_ExtractEngineMetrics(benchmark::State& state) {
  const telemetry::PromScrape scrape = telemetry::ParsePromText(SimExposition());
  for (auto _ : state) benchmark::DoNotOptimize(ExtractEngineMetrics(scrape, Nanos(0)));
}
BENCHMARK(BM_ExtractEngineMetrics);

}  // namespace
}  // namespace kvroute::gateway

BENCHMARK_MAIN();
