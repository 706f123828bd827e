// Decide() cost vs. number of workers, for the default and Dynamo policies. Run:
//   build/<dir>/src/sched/kvroute_sched_bench
#include <benchmark/benchmark.h>

#include <vector>

#include "sched/registry.h"

namespace kvroute::sched {
namespace {

struct Fixture {
  RequestProfile request;
  std::vector<WorkerSnapshot> workers;
};

// n workers with varied load; every 8th holds part of the prompt (GPU or CPU).
Fixture MakeFixture(int n) {
  Fixture f;
  f.request.model = "m";
  f.request.prompt_tokens = 4096;
  f.request.block_size = 16;
  f.request.num_full_blocks = 256;
  f.request.predicted_output_tokens = 256;
  for (int i = 0; i < n; ++i) {
    WorkerSnapshot w;
    w.id = static_cast<WorkerId>(i);
    w.name = "w" + std::to_string(i);
    w.models = {"m"};
    w.inflight_requests = static_cast<std::uint32_t>(i % 17);
    w.pending_prefill_tokens = static_cast<std::uint64_t>((i * 7919) % 20000);
    w.active_kv_blocks = static_cast<std::uint64_t>((i * 104729) % 8000);
    w.kv_capacity_blocks = 10000;
    w.prefill_tokens_per_s = 20000;
    w.decode_step =
        StepTimeModel{.base_s = 0.008, .per_sequence_s = 0.0002, .per_kv_token_s = 2e-8};
    w.kv_bytes_per_block = 2.0 * 1024 * 1024;
    w.tier_load_bytes_per_s[static_cast<int>(Tier::kCpu)] = 2e10;
    f.workers.push_back(w);
    if (i % 8 == 0) {
      CacheView v{.worker = w.id};
      v.depth_blocks[(i / 8) % 2] = static_cast<std::uint32_t>(32 + i % 200);
      f.request.cache_views.push_back(v);
    }
  }
  return f;
}

void BM_Decide(benchmark::State& state, const char* preset) {
  const auto policy = BuiltinPolicy(preset).value();
  const Fixture f = MakeFixture(static_cast<int>(state.range(0)));
  PolicyState ps(1);
  for (auto _ : state) {
    auto d = policy->Decide(f.request, f.workers, ps);
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(BM_Decide, predicted_latency, "predicted_latency")->Arg(8)->Arg(64)->Arg(1024);
BENCHMARK_CAPTURE(BM_Decide, dynamo_cost, "dynamo_cost")->Arg(8)->Arg(64)->Arg(1024);
BENCHMARK_CAPTURE(BM_Decide, llmd_sticky, "llmd_sticky")->Arg(8)->Arg(64)->Arg(1024);

}  // namespace
}  // namespace kvroute::sched

BENCHMARK_MAIN();
