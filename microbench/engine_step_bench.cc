// CPU cost of the engine model itself (not simulated time): how many engine steps and
// requests per second one core can simulate, which bounds `kvroute simulate` at scale and
// `kvroute sim --speedup`. Hash modes side by side: vLLM sha256_cbor vs kvroute BlockKey.
//
//   ninja -C build/<dir> kvroute_engine_bench && build/<dir>/src/engine/kvroute_engine_bench
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/profile.h"

namespace kvroute::engine {
namespace {

Profile BenchProfile() { return LoadProfile(kDefaultProfileName).value(); }

std::vector<TokenId> Prompt(std::size_t n, TokenId start) {
  std::vector<TokenId> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<TokenId>(i);
  return v;
}

// Steady decode: `batch` requests decoding long outputs; one iteration = one Step().
void BM_DecodeStep(benchmark::State& state) {
  const auto batch = static_cast<std::uint32_t>(state.range(0));
  EngineConfig c;
  c.max_num_seqs = batch;
  c.event_hash = static_cast<EventHash>(state.range(1));
  auto engine = NewEngine(BenchProfile(), c);
  int next = 0;
  auto top_up = [&] {
    while (engine->Stats().num_running + engine->Stats().num_waiting < batch) {
      RequestSpec s;
      s.id = "r" + std::to_string(next);
      s.prompt = Prompt(512, 100000 + 1000 * next);
      s.max_tokens = 4096;
      s.ignore_eos = true;
      ++next;
      (void)engine->Add(std::move(s));
    }
  };
  top_up();
  Nanos now{0};
  for (int i = 0; i < 8; ++i) now += engine->Step(now).duration;  // prefills done
  std::int64_t tokens = 0;
  for (auto _ : state) {
    StepResult r = engine->Step(now);
    now += r.duration;
    tokens += static_cast<std::int64_t>(r.tokens.size());
    benchmark::DoNotOptimize(r);
    top_up();
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeStep)
    ->ArgNames({"batch", "blockkey"})
    ->Args({64, 0})
    ->Args({64, 1})
    ->Args({256, 0})
    ->Args({256, 1});

// Whole requests through the engine: 2,048-token prompts sharing a 1,536-token prefix,
// 16 output tokens each. One iteration = one request admitted, prefilled, decoded, finished.
void BM_SharedPrefixRequest(benchmark::State& state) {
  EngineConfig c;
  c.event_hash = static_cast<EventHash>(state.range(0));
  auto engine = NewEngine(BenchProfile(), c);
  const std::vector<TokenId> shared = Prompt(1536, 1);
  Nanos now{0};
  int next = 0;
  for (auto _ : state) {
    RequestSpec s;
    s.id = "r" + std::to_string(next);
    s.prompt = shared;
    const std::vector<TokenId> tail = Prompt(512, 200000 + 512 * next);
    s.prompt.insert(s.prompt.end(), tail.begin(), tail.end());
    s.max_tokens = 16;
    s.ignore_eos = true;
    ++next;
    (void)engine->Add(std::move(s));
    while (engine->HasWork()) now += engine->Step(now).duration;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SharedPrefixRequest)->ArgNames({"blockkey"})->Arg(0)->Arg(1);

}  // namespace
}  // namespace kvroute::engine

BENCHMARK_MAIN();
