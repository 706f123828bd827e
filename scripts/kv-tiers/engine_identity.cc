// Digit-identity check of the engine model (docs/bench/kv-tiers.md): the same random workload
// (argv: CPU blocks, GPU blocks), a digest of every step's duration, tokens, cached tokens and
// event count. Build it once against an old engine/ tree and once against the new one; equal
// lines mean the change left results without the new tiers unchanged.
#include <cstdio>
#include <random>
#include "engine/engine.h"
using namespace kvroute;
using namespace kvroute::engine;
int main(int argc, char** argv) {
  const long cpu = argc > 1 ? atol(argv[1]) : 0;
  auto profile = LoadProfile(kDefaultProfileName).value();
  EngineConfig c;
  c.num_gpu_blocks_override = argc > 2 ? atol(argv[2]) : 60;
  c.num_cpu_blocks = cpu;
  c.max_num_batched_tokens = 256;
  c.max_num_seqs = 8;
  auto e = NewEngine(profile, c);
  std::mt19937 rng(5);
  Nanos now{0};
  unsigned long long digest = 1469598103934665603ULL;
  auto mix = [&](unsigned long long v) { digest = (digest ^ v) * 1099511628211ULL; };
  int id = 0;
  for (int step = 0; step < 4000; ++step) {
    if (step < 3000 && rng() % 3 == 0) {
      RequestSpec s;
      s.id = "r" + std::to_string(id++);
      int pre = rng() % 4;
      for (int k = 0; k < 16 * (1 + pre); ++k) s.prompt.push_back(10000 * (pre + 1) + k);
      for (int k = rng() % 80; k > 0; --k) s.prompt.push_back(rng() % 50);
      s.max_tokens = 1 + rng() % 60;
      s.ignore_eos = rng() % 2;
      (void)e->Add(s);
    }
    StepResult r = e->Step(now);
    now += r.duration + std::chrono::microseconds(100);
    mix(r.duration.count());
    for (auto& t : r.tokens) { mix(t.token); mix(t.cached_tokens); }
    mix(r.kv_events.size());
  }
  auto st = e->Stats();
  printf("cpu=%ld digest=%llx now=%lld hits=%llu cpu_hits=%llu preempt=%llu\n", cpu, digest,
         (long long)now.count(), (unsigned long long)st.prefix_cache_hits,
         (unsigned long long)st.cpu_cache_hits, (unsigned long long)st.num_preemptions);
}
