// KV event codec benchmarks (kv/wire/event_encode.h, kv/wire/event_decode.h):
//   BM_Encode/<layout>   batches encoded per second and bytes/s
//   BM_Decode/<layout>   batches decoded per second and bytes/s
//   BM_CopyPayload       memcpy of the same payload: the floor any decoder is compared with
// The batch is one engine step at a typical prefill: one BlockStored of 32 blocks × 16 tokens
// (512 token ids, 32 uint64 hashes) and four single-hash BlockRemoved evictions.
// Layout arg: 0 = map events (vLLM main), 1 = array events (before PR #42892).
//
// Run: build/<dir>/src/kv/kvroute_bench_event_codec --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kv/wire/event_decode.h"
#include "kv/wire/event_encode.h"

namespace kvroute::kv {
namespace {

KvEventBatch TypicalBatch() {
  std::mt19937_64 rng(42);
  KvEventBatch b;
  b.ts = 1700000000.25;
  b.data_parallel_rank = 0;
  BlockStored s;
  for (int i = 0; i < 32; ++i) s.block_hashes.push_back(rng());
  s.parent_block_hash = rng();
  for (int i = 0; i < 32 * 16; ++i) s.token_ids.push_back(static_cast<TokenId>(rng() % 150000));
  s.block_size = 16;
  s.medium = "GPU";
  s.group_idx = 0;
  s.kv_cache_spec_kind = "full_attention";
  b.events.emplace_back(std::move(s));
  for (int i = 0; i < 4; ++i) {
    b.events.emplace_back(BlockRemoved{.block_hashes = {rng()}, .medium = "GPU", .group_idx = 0});
  }
  return b;
}

EncodeOptions Layout(const benchmark::State& state) {
  EncodeOptions o;
  o.events = state.range(0) == 0 ? EventLayout::kMap : EventLayout::kArray;
  return o;
}

void BM_Encode(benchmark::State& state) {
  const KvEventBatch batch = TypicalBatch();
  const EncodeOptions o = Layout(state);
  std::vector<std::uint8_t> out;
  for (auto _ : state) {
    out.clear();
    AppendEventBatch(batch, o, &out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * out.size()));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Encode)->Arg(0)->Arg(1);

void BM_Decode(benchmark::State& state) {
  const std::vector<std::uint8_t> payload = EncodeEventBatch(TypicalBatch(), Layout(state));
  KvEventBatch out;
  for (auto _ : state) {
    DecodeStatus st = DecodeEventBatch(payload.data(), payload.size(), &out);
    if (!st.ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(out.events.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * payload.size()));
  state.SetItemsProcessed(state.iterations());
  state.counters["payload_bytes"] = static_cast<double>(payload.size());
}
BENCHMARK(BM_Decode)->Arg(0)->Arg(1);

void BM_CopyPayload(benchmark::State& state) {
  const std::vector<std::uint8_t> payload = EncodeEventBatch(TypicalBatch());
  std::vector<std::uint8_t> copy(payload.size());
  for (auto _ : state) {
    std::memcpy(copy.data(), payload.data(), payload.size());
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * payload.size()));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CopyPayload);

}  // namespace
}  // namespace kvroute::kv

BENCHMARK_MAIN();
