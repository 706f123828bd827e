// Differential check of the KV event stream: a consumer that applies every event to a set
// per tier must end up holding exactly what the engine caches, after every step, under a
// random workload with shared prefixes, eviction, preemption, a CPU tier, aborts and resets.
// This is the property the router's index relies on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace kvroute::engine {
namespace {

using enginetest::Req;
using enginetest::Seq;
using enginetest::TestProfile;

struct Mirror {
  std::set<kv::EngineHash> gpu;
  std::set<kv::EngineHash> cpu;

  // Returns a description of the first inconsistency, or "".
  std::string Apply(const kv::KvEvent& e) {
    if (std::holds_alternative<kv::AllBlocksCleared>(e)) {
      gpu.clear();
      cpu.clear();
      return {};
    }
    if (const auto* s = std::get_if<kv::BlockStored>(&e)) {
      if (s->token_ids.size() != s->block_hashes.size() * s->block_size) return "token count";
      auto& tier = s->medium == "CPU" ? cpu : gpu;
      for (kv::EngineHash h : s->block_hashes) {
        if (!tier.insert(h).second) return "stored twice on " + *s->medium;
      }
      return {};
    }
    const auto& r = std::get<kv::BlockRemoved>(e);
    auto& tier = r.medium == "CPU" ? cpu : gpu;
    for (kv::EngineHash h : r.block_hashes) {
      if (tier.erase(h) == 0) return "removed a block not stored on " + *r.medium;
    }
    return {};
  }
};

std::set<kv::EngineHash> AsSet(const std::vector<kv::EngineHash>& v) {
  return {v.begin(), v.end()};
}

void RunRandomWorkload(std::uint32_t seed, EventHash mode) {
  std::mt19937 rng(seed);
  EngineConfig c;
  c.num_gpu_blocks_override = 30;
  c.num_cpu_blocks = 24;
  c.max_num_batched_tokens = 96;
  c.max_num_seqs = 6;
  c.event_hash = mode;
  auto engine = NewEngine(TestProfile(), c);
  // Prompts are drawn from a few shared "system prompts" plus a random tail.
  std::vector<std::vector<TokenId>> prefixes;
  for (int i = 0; i < 4; ++i) prefixes.push_back(Seq(16 * (1 + i), 10000 * (i + 1)));
  Mirror mirror;
  int gpu_removals = 0, cpu_stores = 0, cpu_removals = 0, clears = 0;
  std::vector<std::string> live;
  int next_id = 0;
  Nanos now{0};
  auto step_and_check = [&](int step) {
    const StepResult r = engine->Step(now);
    now += r.duration;
    for (const kv::KvEvent& e : r.kv_events) {
      if (const auto* rm = std::get_if<kv::BlockRemoved>(&e)) {
        if (rm->medium == "CPU") {
          ++cpu_removals;
        } else {
          ++gpu_removals;
        }
      } else if (const auto* st = std::get_if<kv::BlockStored>(&e); st && st->medium == "CPU") {
        ++cpu_stores;
      } else if (std::holds_alternative<kv::AllBlocksCleared>(e)) {
        ++clears;
      }
      const std::string err = mirror.Apply(e);
      ASSERT_EQ(err, "") << "seed " << seed << " step " << step;
    }
    ASSERT_EQ(mirror.gpu, AsSet(engine->CachedBlockHashes(kv::Tier::kGpu)))
        << "seed " << seed << " step " << step;
    ASSERT_EQ(mirror.cpu, AsSet(engine->CachedBlockHashes(kv::Tier::kCpu)))
        << "seed " << seed << " step " << step;
    const EngineStats s = engine->Stats();
    ASSERT_LE(s.kv_cache_usage, 1.0);
    ASSERT_LE(s.num_running, c.max_num_seqs);
    ASSERT_LE(r.num_prefill_tokens + r.num_decode_tokens, c.max_num_batched_tokens);
  };
  // Three rounds: 250 steps with arrivals and aborts, a drain, a prefix-cache reset.
  int step = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 250; ++i, ++step) {
      if (rng() % 2 == 0) {
        std::vector<TokenId> prompt = prefixes[rng() % prefixes.size()];
        const std::size_t tail = rng() % 60;
        for (std::size_t k = 0; k < tail; ++k) prompt.push_back(rng() % 50);
        const std::string id = "r" + std::to_string(next_id++);
        auto spec = Req(id, prompt, 1 + rng() % 120, rng() % 2 == 0);
        if (!engine->Add(spec)) live.push_back(id);
      }
      if (!live.empty() && rng() % 25 == 0) engine->Abort(live[rng() % live.size()]);
      step_and_check(step);
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (int i = 0; i < 20000 && engine->HasWork(); ++i, ++step) {
      step_and_check(step);
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_TRUE(engine->ResetPrefixCache()) << "not drained at step " << step;
  }
  step_and_check(step);  // delivers the last AllBlocksCleared
  // The workload must actually exercise what it claims to check.
  EXPECT_GT(gpu_removals, 0);
  EXPECT_GT(cpu_stores, 0);
  EXPECT_GT(cpu_removals, 0);
  EXPECT_EQ(clears, 3);
  EXPECT_GT(engine->Stats().num_preemptions, 0u);
  EXPECT_GT(engine->Stats().cpu_cache_hits, 0u);
  EXPECT_GT(engine->Stats().prefix_cache_hits, 0u);
  std::printf(
      "seed %u: gpu removals %d, cpu stores %d, cpu removals %d, clears %d, "
      "preemptions %llu\n",
      seed, gpu_removals, cpu_stores, cpu_removals, clears,
      static_cast<unsigned long long>(engine->Stats().num_preemptions));
}

TEST(EngineEventsTest, EventStreamMirrorsTheCacheWithVllmHashes) {
  for (std::uint32_t seed = 1; seed <= 3; ++seed)
    RunRandomWorkload(seed, EventHash::kVllmSha256Cbor);
}

TEST(EngineEventsTest, EventStreamMirrorsTheCacheWithBlockKeys) {
  for (std::uint32_t seed = 11; seed <= 13; ++seed) RunRandomWorkload(seed, EventHash::kBlockKey);
}

}  // namespace
}  // namespace kvroute::engine
