// CPU cost of the router state on the request path: one request's booking (book, first
// token, 32 tokens, done) with rate learning and the pool update, and a snapshot of N workers,
// fresh (kvroute serve) and refreshed in place (kvroute simulate).
#include <benchmark/benchmark.h>

#include <string>

#include "fleet/router_state.h"

namespace kvroute::fleet {
namespace {

void AddWorkers(RouterState& state, int workers) {
  for (int i = 0; i < workers; ++i) {
    WorkerSpec spec;
    spec.name = "w" + std::to_string(i);
    spec.models = {"m"};
    auto id = state.Add(spec, Nanos(0));
    EngineMetrics m;
    m.num_waiting = 2;
    if (id) state.SetMetrics(*id, m);
  }
}

void BM_RequestBookingLifecycle(benchmark::State& state) {
  RouterState fleet;
  AddWorkers(fleet, 8);
  RequestId id = 0;
  Nanos now{0};
  for (auto _ : state) {
    ++id;
    fleet.Book(id, {.worker = 0, .prompt_tokens = 2000, .uncached_tokens = 500, .kv_blocks = 130},
               now);
    now += std::chrono::milliseconds(50);
    fleet.OnFirstToken(id, now);
    for (int t = 0; t < 32; ++t) {
      now += std::chrono::milliseconds(20);
      fleet.OnToken(id, now);
    }
    fleet.OnDone(id, now, true);
  }
}
BENCHMARK(BM_RequestBookingLifecycle);

void BM_Snapshot(benchmark::State& state) {
  RouterState fleet;
  AddWorkers(fleet, static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(fleet.Snapshot(Nanos(1), "m"));
}
BENCHMARK(BM_Snapshot)->Arg(8)->Arg(64)->Arg(512);

void BM_RefreshUnchanged(benchmark::State& state) {
  RouterState fleet;
  AddWorkers(fleet, static_cast<int>(state.range(0)));
  SnapshotCache cache;
  for (auto _ : state) {
    fleet.Refresh(Nanos(1), &cache);
    benchmark::DoNotOptimize(cache.workers().data());
  }
}
BENCHMARK(BM_RefreshUnchanged)->Arg(8)->Arg(64)->Arg(512);

}  // namespace
}  // namespace kvroute::fleet

BENCHMARK_MAIN();
