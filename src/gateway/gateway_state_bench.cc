// CPU cost of the worker-state paths that run per request or per scrape: parsing a vLLM-sized
// /metrics body, extracting engine metrics, one request's load bookkeeping (route, first
// token, 32 tokens, done) with rate learning, and assembling a snapshot of N workers.
#include <benchmark/benchmark.h>

#include <string>

#include "gateway/engine_metrics.h"
#include "gateway/load_tracker.h"
#include "gateway/rate_learner.h"
#include "gateway/worker_registry.h"
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

void BM_RequestLoadLifecycle(benchmark::State& state) {
  RateLearner learner;
  learner.Seed(0, {.prefill_overhead_s = 0.01,
                   .prefill_s_per_token = 1e-4,
                   .decode = {.base_s = 0.02, .per_sequence_s = 1e-4, .per_kv_token_s = 1e-8}});
  LoadTracker tracker(&learner);
  RequestId id = 0;
  Nanos now{0};
  for (auto _ : state) {
    ++id;
    tracker.OnRouted(
        id, {.worker = 0, .prompt_tokens = 2000, .uncached_tokens = 500, .kv_blocks = 130}, now);
    now += std::chrono::milliseconds(50);
    tracker.OnFirstToken(id, now);
    for (int t = 0; t < 32; ++t) {
      now += std::chrono::milliseconds(20);
      tracker.OnToken(id, now);
    }
    tracker.OnDone(id, now, true);
  }
}
BENCHMARK(BM_RequestLoadLifecycle);

void BM_RegistrySnapshot(benchmark::State& state) {
  WorkerRegistry registry;
  for (int i = 0; i < state.range(0); ++i) {
    WorkerSpec spec;
    spec.name = "w" + std::to_string(i);
    spec.base_url = "http://127.0.0.1:" + std::to_string(9000 + i);
    spec.models = {"m"};
    auto id = registry.Add(spec, Nanos(0));
    if (!id) state.SkipWithError(id.error().c_str());
    EngineMetrics m;
    m.num_waiting = 2;
    registry.SetMetrics(*id, m);
  }
  for (auto _ : state) benchmark::DoNotOptimize(registry.Snapshot(Nanos(1), "m"));
}
BENCHMARK(BM_RegistrySnapshot)->Arg(8)->Arg(64)->Arg(512);

}  // namespace
}  // namespace kvroute::gateway

BENCHMARK_MAIN();
