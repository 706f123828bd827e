// Randomized edge test of KvIndex: the regimes of the other index_edge_*_test.cc files (a
// chain past 65,535 blocks, a 300-child fan-out, salted and keyed hashes, clears, worker
// removal, staleness) mixed in one seeded stream over 40 workers, against the reference model
// (kv/index/index_reference_model.h): lookups, stats, four counters and Dump/Restore copies. On
// failure the seed and step are printed. Shared helpers: kv/index/index_edge_test_util.h.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kv/index/index.h"
#include "kv/index/index_edge_test_util.h"
#include "kv/index/index_reference_model.h"
#include "kv/index/index_test_util.h"

namespace kvroute::kv {
namespace {

using testing::Batch;
using testing::ByWorker;
using testing::H;
using testing::PromptKeys;
using testing::PublishesKeys;
using testing::ReferenceIndex;
using testing::Remove;
using testing::Settle;
using testing::Slice;
using testing::StatsTuple;
using testing::Store;
using testing::SyntheticEngineHash;
using testing::TokensOf;

// One seeded stream over 40 workers: short prompts with salted duplicates (workers 5 and 6
// publish kvroute's keys for unsalted prompts, so they start keyed and may switch), a block
// with up to 300 continuations per worker (workers 3..5, batches of up to 24), and a chain of
// 65,540 blocks (worker 1 in GPU, worker 2 its first 65,537 in CPU) edited near its end.
void RunMixedSeed(std::uint64_t seed, int steps) {
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  BlockKeyer keyer;
  KvIndex index(keyer);
  ReferenceIndex ref(keyer);
  constexpr int kWorkers = 40;
  constexpr std::uint32_t kDeep = 65'540, kDeepCpu = 65'537, kFan = 300, kFanRoot = 40;
  std::map<WorkerId, std::vector<std::pair<EngineHash, std::string>>> stored;
  auto apply = [&](WorkerId w, std::vector<KvEvent> events) {
    for (const KvEvent& e : events) {
      ref.Apply(w, e);
      if (const auto* s = std::get_if<BlockStored>(&e)) {
        for (EngineHash h : s->block_hashes) stored[w].emplace_back(h, *s->medium);
      }
    }
    index.ApplyBatch(w, Batch(std::move(events)));
    if (uniform(32) == 0) Settle(index);  // O(nodes) here: the dummy worker is keyed
  };

  // The deep chain.
  std::vector<std::uint32_t> deep(kDeep);
  for (std::uint32_t i = 0; i < kDeep; ++i) deep[i] = 500'000 + i;
  const auto deep_keys = PromptKeys(keyer, deep);
  auto deep_hash = [](WorkerId w, std::uint32_t i) { return H(w, 1'000'000 + i); };
  auto store_deep = [&](WorkerId w) {
    const std::uint32_t n = w == 1 ? kDeep : kDeepCpu;
    std::vector<EngineHash> hashes;
    for (std::uint32_t i = 0; i < n; ++i) hashes.push_back(deep_hash(w, i));
    apply(w, {Store(std::move(hashes), std::nullopt, Slice(deep, 0, n), w == 1 ? "GPU" : "CPU")});
  };
  store_deep(1);
  store_deep(2);

  // The fan-out: root content kFanRoot, child r content kFanRoot + 1 + r.
  const BlockKey fan_root = PromptKeys(keyer, {kFanRoot})[0];
  auto fan_key = [&](std::uint32_t r) {
    const std::vector<TokenId> tokens = TokensOf({kFanRoot + 1 + r});
    return keyer.Next(fan_root, tokens);
  };
  auto fan_hash = [&](WorkerId w, std::optional<std::uint32_t> r) {
    if (PublishesKeys(w, 0)) return r ? fan_key(*r) : fan_root;
    return H(w, 2'000'000 + (r ? *r + 1 : 0));
  };

  // Short prompts over a 3-letter alphabet, with a salt that changes engine hashes only.
  using Prompt = testing::SyntheticPrompt;
  auto random_prompt = [&] {
    Prompt p;
    const int len = 1 + uniform(8);
    for (int i = 0; i < len; ++i) p.contents.push_back(1 + uniform(3));
    p.lora = uniform(6) == 0 ? "adapter-a" : "";
    p.salt = uniform(3) == 0 ? 1 + uniform(3) : 0;
    return p;
  };
  const std::array<std::string, 4> media{"GPU", "CPU", "DISK", "SHARED"};
  std::vector<Prompt> recent;

  auto compare = [&](const std::vector<BlockKey>& keys, int step, const KvIndex& idx) {
    ASSERT_EQ(ByWorker(idx.Lookup(keys)), ref.Lookup(keys))
        << "seed=" << seed << " step=" << step << " keys=" << keys.size();
  };
  auto Child = [&](BlockKey parent, std::uint32_t c) {
    const std::vector<TokenId> tokens = TokensOf({c});
    return keyer.Next(parent, tokens);
  };
  // Prompts are chains (Lookup may assume keys[i] is a child of keys[i - 1]).
  auto lookup_prompt = [&] {
    const int kind = uniform(20);
    if (kind < 2) {  // the deep chain, diverging near its end
      const std::uint32_t at = kDeep - 20 + uniform(21);
      std::vector<BlockKey> keys(deep_keys.begin(), deep_keys.begin() + at);
      if (uniform(2) == 0) keys.push_back(Child(keys.back(), 0xABCDEF));  // a real prompt's chain
      return keys;
    }
    if (kind < 8) {  // the fan-out, sometimes one block further
      std::vector<BlockKey> keys{fan_root, fan_key(uniform(kFan + 5))};
      if (uniform(3) == 0) {
        const std::vector<TokenId> tokens = TokensOf({7});
        keys.push_back(keyer.Next(keys.back(), tokens));
      }
      return keys;
    }
    Prompt p = recent.empty() || uniform(4) == 0 ? random_prompt()
                                                 : recent[uniform(static_cast<int>(recent.size()))];
    if (uniform(3) == 0) p.contents[uniform(static_cast<int>(p.contents.size()))] = 9;
    return PromptKeys(keyer, p.contents, p.lora);
  };

  for (int step = 0; step < steps; ++step) {
    WorkerId w = static_cast<WorkerId>(1 + uniform(kWorkers));
    const int op = uniform(1000);
    if (op < 300) {  // a short prompt's run, from its start or continuing a stored prefix
      Prompt p = !recent.empty() && uniform(2) == 0
                     ? recent[uniform(static_cast<int>(recent.size()))]
                     : random_prompt();
      if (recent.size() < 32) {
        recent.push_back(p);
      } else {
        recent[uniform(32)] = p;
      }
      const int len = static_cast<int>(p.contents.size());
      const int from = uniform(3) == 0 ? uniform(len) : 0;
      const int to = from + 1 + uniform(len - from);
      BlockStored s = Store({}, std::nullopt, {p.contents.begin() + from, p.contents.begin() + to},
                            uniform(5) == 0 ? media[uniform(4)] : "GPU");
      for (int i = from; i < to; ++i) s.block_hashes.push_back(SyntheticEngineHash(keyer, w, p, i));
      if (from > 0) s.parent_block_hash = SyntheticEngineHash(keyer, w, p, from - 1);
      if (!p.lora.empty()) s.lora_name = p.lora;
      apply(w, {s});
    } else if (op < 420) {  // up to 24 continuations of the fan-out root, maybe the root too
      w = static_cast<WorkerId>(3 + uniform(3));
      std::vector<KvEvent> events;
      if (uniform(5) == 0)
        events.push_back(Store({fan_hash(w, std::nullopt)}, std::nullopt, {kFanRoot}));
      for (int k = 1 + uniform(24); k > 0; --k) {
        const std::uint32_t r = uniform(kFan);
        events.push_back(Store({fan_hash(w, r)}, fan_hash(w, std::nullopt), {kFanRoot + 1 + r}));
      }
      apply(w, std::move(events));
    } else if (op < 700) {  // removals of stored hashes (any regime), some unknown
      if (uniform(4) == 0) w = static_cast<WorkerId>(3 + uniform(3));
      auto& mine = stored[w];
      BlockRemoved r = Remove({});
      for (int k = 1 + uniform(4); k > 0; --k) {
        if (mine.empty() || uniform(10) == 0) {
          r.block_hashes.push_back(0xDEAD0000ULL + uniform(1000));
          continue;
        }
        const auto& [h, medium] = mine[uniform(static_cast<int>(mine.size()))];
        r.block_hashes.push_back(h);
        r.medium = uniform(8) == 0 ? media[uniform(4)] : medium;
      }
      apply(w, {r});
    } else if (op < 760) {  // the deep chain's end: remove or (re)store a block
      w = static_cast<WorkerId>(1 + uniform(2));
      const std::uint32_t n = w == 1 ? kDeep : kDeepCpu;
      const std::uint32_t i = n - 1 - uniform(12);
      const std::string medium = w == 1 ? "GPU" : "CPU";
      if (uniform(2) == 0) {
        apply(w, {Remove({deep_hash(w, i)}, medium)});
      } else {
        apply(w, {Store({deep_hash(w, i)}, deep_hash(w, i - 1), {deep[i]}, medium)});
      }
    } else if (op < 770) {
      if (w <= 2 && uniform(4) != 0) w += 10;  // the deep chain is slow to store again
      apply(w, {AllBlocksCleared{}});
      stored[w].clear();
    } else if (op < 772) {
      w = static_cast<WorkerId>(1 + uniform(2));
      store_deep(w);
    } else if (op < 775) {
      ref.RemoveWorker(w);
      index.RemoveWorker(w);
      stored[w].clear();
    } else if (op < 785) {
      if (uniform(2) == 0) {
        ref.MarkStale(w);
        index.MarkStale(w);
      } else {
        ref.ClearStale(w);
        index.ClearStale(w);
      }
    } else {
      compare(lookup_prompt(), step, index);
      if (::testing::Test::HasFatalFailure()) return;
    }
    if (step % 100 == 99) {
      const IndexCounters got = index.counters();
      IndexStats got_stats = index.stats();
      const bool nodes = step % 1000 == 999;
      if (!nodes) got_stats.nodes = 0;
      ASSERT_EQ(StatsTuple(got_stats), StatsTuple(ref.Stats(nodes))) << "step=" << step;
      ASSERT_EQ(std::tuple(got.unknown_removals, got.unknown_parent_runs, got.hash_conflicts,
                           got.ref_overflow),
                std::tuple(ref.counters.unknown_removals, ref.counters.unknown_parent_runs,
                           ref.counters.hash_conflicts, ref.counters.ref_overflow))
          << "step=" << step;
    }
    if (step % 1000 == 999) {
      KvIndex copy(keyer);
      const std::string image = index.Dump();
      auto restored = copy.Restore(image);
      ASSERT_TRUE(restored.has_value()) << restored.error();
      ASSERT_EQ(copy.Dump(), image) << "step=" << step;
      ASSERT_EQ(StatsTuple(copy.stats()), StatsTuple(ref.Stats())) << "step=" << step;
      for (int k = 0; k < 50; ++k) {
        compare(lookup_prompt(), step, copy);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(IndexEdgeRandomTest, MixedRegimesAgreeWithTheReferenceModel) {
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    RunMixedSeed(seed, 1500);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace kvroute::kv
