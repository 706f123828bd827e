// KV block index benchmarks (kv/index/index.h):
//   BM_ApplyEvents       block events applied per second (1 and 2 threads); a cyclic stream of
//                        chained stores over a shared system prompt plus tail-first removals,
//                        so the index stays at a fixed size (Arg = live entries per worker).
//   BM_Lookup128k        one lookup of a 128k-token prompt (8,192 blocks of 16) against 1,024
//                        workers and ~10M (block, worker) entries; reports p50/p99 per lookup
//                        and the allocator's bytes per entry.
//   BM_Lookup128kKeyedHashes  the same world built by engines whose block hashes are
//                        kvroute's keys (the index keeps no engine maps): bytes per entry.
//   BM_Lookup128kStaircase  the adversarial case: every worker holds the prompt to a
//                        different depth (1,024 distinct depths, ~4M entries on the path).
//
// Run: build/<dir>/bench/kvroute_bench_index --benchmark_min_time=2s   (see README "Index")
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "kv/keys/block_key.h"
#include "kv/index/index.h"

namespace kvroute::kv {
namespace {

constexpr std::uint32_t kBs = kDefaultBlockSize;

// Tokens of `blocks` blocks whose content is a pure function of (stream, block index).
std::vector<TokenId> SyntheticTokens(std::uint64_t stream, std::size_t first_block,
                                     std::size_t blocks) {
  std::vector<TokenId> out(blocks * kBs);
  for (std::size_t b = 0; b < blocks; ++b) {
    std::uint64_t x = stream * 0x9E3779B97F4A7C15ULL + (first_block + b) * 0xBF58476D1CE4E5B9ULL;
    for (std::uint32_t k = 0; k < kBs; ++k) {
      x ^= x >> 31;
      x *= 0x94D049BB133111EBULL;
      out[b * kBs + k] = static_cast<TokenId>(x % 150000);
    }
  }
  return out;
}

std::size_t HeapBytes() {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;  // small allocations + mmapped large arrays
}

// Resident set size: a cross-check of the heap count that sees every page actually touched
// (huge pages included) and none merely reserved.
std::size_t RssBytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<std::size_t>(resident) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// ---------------------------------------------------------------------------------------------
// Apply throughput.

constexpr int kApplyWorkers = 64;
constexpr std::size_t kSystemBlocks = 8;
constexpr std::size_t kRunBlocks = 16;   // blocks per BlockStored (one prefill chunk)
constexpr std::size_t kConvBlocks = 64;  // blocks per conversation
constexpr int kConvsPerCycle = 64;

struct ApplyStream {
  std::vector<std::vector<KvEventBatch>> per_worker;  // cyclic: ends in the state it starts in
};

// Worker w stores conversations in 16-block runs (the first run starts with the shared system
// prompt), keeps `live_convs` conversations and removes the oldest tail first. One cycle
// replays the same conversations, so the index size is stationary across cycles.
ApplyStream MakeApplyStream(int live_convs) {
  ApplyStream s;
  s.per_worker.resize(kApplyWorkers);
  for (int w = 0; w < kApplyWorkers; ++w) {
    auto& out = s.per_worker[w];
    auto hash = [&](int conv, std::size_t i) {
      return (static_cast<EngineHash>(w) << 40) | (static_cast<EngineHash>(conv) << 16) | i;
    };
    auto remove_conv = [&](int conv) {
      for (std::size_t end = kConvBlocks; end > 0; end -= kRunBlocks) {
        BlockRemoved r;
        for (std::size_t i = end; i-- > end - kRunBlocks;) r.block_hashes.push_back(hash(conv, i));
        out.push_back(KvEventBatch{0, {r}, std::nullopt});
      }
    };
    for (int c = 0; c < kConvsPerCycle + live_convs; ++c) {
      const int conv = c % kConvsPerCycle;
      if (c >= live_convs) remove_conv((c - live_convs) % kConvsPerCycle);
      if (c >= kConvsPerCycle) continue;  // the tail of the cycle only removes
      for (std::size_t first = 0; first < kConvBlocks; first += kRunBlocks) {
        BlockStored st;
        for (std::size_t i = first; i < first + kRunBlocks; ++i)
          st.block_hashes.push_back(hash(conv, i));
        if (first > 0) st.parent_block_hash = hash(conv, first - 1);
        // Blocks [0, kSystemBlocks) are the system prompt, equal on every worker.
        std::vector<TokenId> sys = SyntheticTokens(1, 0, kSystemBlocks);
        std::vector<TokenId> own = SyntheticTokens(1000 + w * 1000 + conv, 0, kConvBlocks);
        std::copy(sys.begin(), sys.end(), own.begin());
        st.token_ids.assign(own.begin() + first * kBs, own.begin() + (first + kRunBlocks) * kBs);
        st.medium = "GPU";
        out.push_back(KvEventBatch{0, {st}, std::nullopt});
      }
    }
  }
  return s;
}

// The timed loop's call, kept out of line so that instruction counts can be collected for
// the stationary state alone (valgrind --toggle-collect='*ApplyTimed*'): KvIndex::ApplyBatch
// also runs in each benchmark run's warm-up cycle, which grows the tables from empty.
[[gnu::noinline]] void ApplyTimed(KvIndex& index, WorkerId worker, const KvEventBatch& batch) {
  index.ApplyBatch(worker, batch);
}

void BM_ApplyEvents(benchmark::State& state) {
  static std::unique_ptr<KvIndex> index;
  static std::unique_ptr<ApplyStream> stream;
  static BlockKeyer keyer;
  if (state.thread_index() == 0) {
    stream = std::make_unique<ApplyStream>(MakeApplyStream(static_cast<int>(state.range(0))));
    index = std::make_unique<KvIndex>(keyer);
    // One full cycle first, so measurement starts in the stationary state.
    for (int w = 0; w < kApplyWorkers; ++w) {
      for (const auto& b : stream->per_worker[w]) index->ApplyBatch(w, b);
    }
  }
  // Threads own disjoint workers (per-worker order preserved, as the contract requires).
  const int threads = state.threads();
  std::vector<std::size_t> pos(kApplyWorkers, 0);
  int w = state.thread_index();
  std::int64_t blocks = 0;
  for (auto _ : state) {
    const KvEventBatch& b = stream->per_worker[w][pos[w]];
    ApplyTimed(*index, w, b);
    blocks += static_cast<std::int64_t>(kRunBlocks);
    pos[w] = (pos[w] + 1) % stream->per_worker[w].size();
    w += threads;
    if (w >= kApplyWorkers) w = state.thread_index();
  }
  state.SetItemsProcessed(blocks);
  if (state.thread_index() == 0) {
    state.counters["entries"] = static_cast<double>(index->stats().entries);
  }
}
BENCHMARK(BM_ApplyEvents)->Arg(8)->Arg(48)->Threads(1)->Threads(2)->UseRealTime();
// Exactly two cycles of the Arg(8) stream (64 workers x 512 batches each), one thread: the
// instruction count per block event under callgrind (--toggle-collect='*ApplyTimed*') then
// covers whole cycles, equal in every binary. A cycle fills the index from empty and drains
// it again, so table growth and shrinking are part of it.
BENCHMARK(BM_ApplyEvents)->Arg(8)->Iterations(2 * 32768)->UseRealTime();

// ---------------------------------------------------------------------------------------------
// Lookup latency.

constexpr int kLookupWorkers = 1024;
constexpr std::size_t kPromptBlocks = 8192;
constexpr std::size_t kTargetEntries = 10'000'000;

struct LookupWorld {
  BlockKeyer keyer;
  std::unique_ptr<KvIndex> index = std::make_unique<KvIndex>(keyer);
  std::vector<std::vector<BlockKey>> prompts;
  double bytes_per_entry = 0;      // heap growth (malloc's view)
  double rss_bytes_per_entry = 0;  // resident set growth
  std::size_t entries = 0;
  std::size_t nodes = 0;  // distinct blocks: the node table's and node arena's element count
};

// Stores blocks [from, to) of `tokens` for `worker` with engine hashes base + i, or, when
// `keys` is given, the blocks' canonical keys (an engine hashing as kvroute does).
void StoreRange(KvIndex& index, WorkerId worker, const std::vector<TokenId>& tokens,
                std::size_t from, std::size_t to, EngineHash base,
                const std::vector<BlockKey>* keys = nullptr) {
  auto hash = [&](std::size_t i) { return keys != nullptr ? (*keys)[i] : base + i; };
  for (std::size_t first = from; first < to; first += 256) {
    const std::size_t last = std::min(to, first + 256);
    BlockStored st;
    for (std::size_t i = first; i < last; ++i) st.block_hashes.push_back(hash(i));
    if (first > 0) st.parent_block_hash = hash(first - 1);
    st.token_ids.assign(tokens.begin() + first * kBs, tokens.begin() + last * kBs);
    st.medium = "GPU";
    index.ApplyBatch(worker, KvEventBatch{0, {st}, std::nullopt});
  }
}

// Realistic mix: all workers hold the 128-block system prompt; 64 workers hold a shared
// 2,048-block document to random depths; for each of 8 prompt variants 8 workers hold the
// conversation to depths in [4096, 8192] (one of them with an evicted block: a hole); every
// worker fills up to ~9,765 entries with conversations of its own.
std::unique_ptr<LookupWorld> BuildRealistic(bool keyed_hashes) {
  auto world = std::make_unique<LookupWorld>();
  KvIndex& index = *world->index;
  std::mt19937_64 rng(7);
  const std::size_t before = HeapBytes();
  const std::size_t rss_before = RssBytes();
  std::vector<std::vector<TokenId>> prompt_tokens;
  std::vector<std::vector<BlockKey>> prompt_keys;
  for (int v = 0; v < 8; ++v) {
    std::vector<TokenId> t = SyntheticTokens(1, 0, 2176);  // system + document
    std::vector<TokenId> tail = SyntheticTokens(50 + v, 2176, kPromptBlocks - 2176);
    t.insert(t.end(), tail.begin(), tail.end());
    prompt_tokens.push_back(std::move(t));
  }
  // The prompts' keys are the lookups' input, not index memory (the tokens above stay
  // counted, as they always were: 0.4 B per entry).
  const std::size_t before_keys = HeapBytes();
  for (const auto& t : prompt_tokens) prompt_keys.push_back(world->keyer.Keys(t));
  const std::size_t keys_bytes = HeapBytes() - before_keys;
  std::vector<std::size_t> held(kLookupWorkers, 0);
  for (WorkerId w = 0; w < kLookupWorkers; ++w) {
    const EngineHash base = static_cast<EngineHash>(w) << 32;
    std::size_t depth = 128;
    if (w < 64) depth = 128 + rng() % 2048;
    if (w >= 64 && w < 128) depth = 4096 + rng() % 4097;
    const std::size_t variant = (w >= 64 && w < 128) ? (w - 64) / 8 : 0;
    const auto* keys = keyed_hashes ? &prompt_keys[variant] : nullptr;
    StoreRange(index, w, prompt_tokens[variant], 0, depth, base, keys);
    if (w >= 64 && w < 128 && w % 8 == 0) {
      BlockRemoved r;
      r.block_hashes.push_back(keyed_hashes ? (*keys)[3000] : base + 3000);
      index.ApplyBatch(w, KvEventBatch{0, {r}, std::nullopt});
    }
    held[w] = depth;
  }
  // Fill with unrelated conversations of 256 blocks until ~10M entries.
  for (WorkerId w = 0; w < kLookupWorkers; ++w) {
    const std::size_t quota = kTargetEntries / kLookupWorkers;
    for (int conv = 0; held[w] < quota; ++conv) {
      const std::size_t n = std::min<std::size_t>(256, quota - held[w]);
      std::vector<TokenId> t = SyntheticTokens(1'000'000 + w * 1000 + conv, 0, n);
      std::vector<BlockKey> keys;
      if (keyed_hashes) keys = world->keyer.Keys(t);
      StoreRange(index, w, t, 0, n, (static_cast<EngineHash>(w) << 32) | ((conv + 1ULL) << 16),
                 keyed_hashes ? &keys : nullptr);
      held[w] += n;
    }
  }
  const IndexStats stats = index.stats();
  world->entries = stats.entries;
  world->nodes = stats.nodes;
  world->bytes_per_entry = static_cast<double>(HeapBytes() - before - keys_bytes) / world->entries;
  world->rss_bytes_per_entry = static_cast<double>(RssBytes() - rss_before) / world->entries;
  world->prompts = std::move(prompt_keys);
  return world;
}

// Every worker w holds the prompt to depth 8*(w+1): 1,024 distinct drop points.
std::unique_ptr<LookupWorld> BuildStaircase() {
  auto world = std::make_unique<LookupWorld>();
  const std::size_t before = HeapBytes();
  const std::size_t rss_before = RssBytes();
  std::vector<TokenId> tokens = SyntheticTokens(1, 0, kPromptBlocks);
  for (WorkerId w = 0; w < kLookupWorkers; ++w) {
    StoreRange(*world->index, w, tokens, 0, 8 * (w + 1), static_cast<EngineHash>(w) << 32);
  }
  const IndexStats stats = world->index->stats();
  world->entries = stats.entries;
  world->nodes = stats.nodes;
  world->bytes_per_entry = static_cast<double>(HeapBytes() - before) / world->entries;
  world->rss_bytes_per_entry = static_cast<double>(RssBytes() - rss_before) / world->entries;
  world->prompts.push_back(world->keyer.Keys(tokens));
  return world;
}

// Thread CPU time: on a shared machine wall-clock percentiles mostly measure preemption, so
// both are reported.
double ThreadCpuMicros() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// Context switches of this thread so far. A lookup during which the thread was switched out
// resumes with caches and TLB refilled by other jobs: on the shared dev VM (load 10-20 on 2
// cores) that, not the algorithm, sets the CPU-time tail. Lookups without a switch are
// reported apart ("quiet") so the two can be told apart.
long ContextSwitches() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

double Percentile(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * (v.size() - 1))];
}

void RunLookups(benchmark::State& state, const LookupWorld& world) {
  std::vector<double> wall_us, cpu_us, quiet_cpu_us;
  std::size_t i = 0, matched = 0;
  for (auto _ : state) {
    const auto& keys = world.prompts[i++ % world.prompts.size()];
    const long s0 = ContextSwitches();
    const double c0 = ThreadCpuMicros();
    const auto t0 = std::chrono::steady_clock::now();
    auto result = world.index->Lookup(keys);
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = ThreadCpuMicros();
    const long s1 = ContextSwitches();
    benchmark::DoNotOptimize(result.data());
    if (s1 == s0) quiet_cpu_us.push_back(c1 - c0);
    matched += result.size();
    wall_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    cpu_us.push_back(c1 - c0);
  }
  state.counters["wall_p50_us"] = Percentile(wall_us, 0.50);
  state.counters["wall_p99_us"] = Percentile(wall_us, 0.99);
  state.counters["cpu_p50_us"] = Percentile(cpu_us, 0.50);
  state.counters["cpu_p99_us"] = Percentile(cpu_us, 0.99);
  if (!quiet_cpu_us.empty()) {
    state.counters["quiet_p50_us"] = Percentile(quiet_cpu_us, 0.50);
    state.counters["quiet_p99_us"] = Percentile(quiet_cpu_us, 0.99);
  }
  state.counters["quiet_share"] = static_cast<double>(quiet_cpu_us.size()) / cpu_us.size();
  state.counters["workers_matched"] = static_cast<double>(matched) / wall_us.size();
  state.counters["entries"] = static_cast<double>(world.entries);
  state.counters["nodes"] = static_cast<double>(world.nodes);
  state.counters["bytes_per_entry"] = world.bytes_per_entry;
  state.counters["rss_bytes_per_entry"] = world.rss_bytes_per_entry;
}

void BM_Lookup128k(benchmark::State& state) {
  static std::unique_ptr<LookupWorld> world = BuildRealistic(/*keyed_hashes=*/false);
  RunLookups(state, *world);
}
BENCHMARK(BM_Lookup128k)->Unit(benchmark::kMicrosecond);

void BM_Lookup128kKeyedHashes(benchmark::State& state) {
  static std::unique_ptr<LookupWorld> world = BuildRealistic(/*keyed_hashes=*/true);
  RunLookups(state, *world);
}
BENCHMARK(BM_Lookup128kKeyedHashes)->Unit(benchmark::kMicrosecond);

void BM_Lookup128kStaircase(benchmark::State& state) {
  static std::unique_ptr<LookupWorld> world = BuildStaircase();
  RunLookups(state, *world);
}
BENCHMARK(BM_Lookup128kStaircase)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvroute::kv

BENCHMARK_MAIN();
