// Black-box edge cases of KvIndex's per-entry counts: worker slots past 32,768 (33,000
// workers, with removals, staleness, reuse and clears), reference counts 1/2/3/255/300
// (saturating at 255) per tier, and kids counts around 7/8 and 253..257 in each tier and in
// one entry across tiers, with holes. Only the public API is used; expectations are computed
// by hand from what each test stored. Shared helpers: kv/index/index_edge_test_util.h.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kv/index/index.h"
#include "kv/index/index_edge_test_util.h"
#include "kv/index/index_test_util.h"

namespace kvroute::kv {
namespace {

using testing::ApplySettled;
using testing::Batch;
using testing::ByWorker;
using testing::H;
using testing::Hashes;
using testing::IndexEdgeTest;
using testing::Match;
using testing::PromptKeys;
using testing::Remove;
using testing::Slice;
using testing::StatsTuple;
using testing::Store;

// ---------------------------------------------------------------------------------------------
// Worker slots past 32,768.

TEST_F(IndexEdgeTest, ThirtyThreeThousandWorkersEachKeepExactDepths) {
  constexpr std::uint32_t kWorkers = 33'000;
  constexpr std::uint32_t kGroups = 128;
  // Worker k (id 1,000,000 + k) stores 1..3 blocks of its group's prompt, in GPU or CPU;
  // every third also a block of its own (held by one worker whatever its slot).
  struct Expect {
    std::uint32_t group, len;
    int tier;
    bool own;
    bool stale = false;
  };
  std::map<WorkerId, Expect> expect;
  auto group_prompt = [](std::uint32_t g) {
    return std::vector<std::uint32_t>{g + 1, 1000 + g, 2000 + g};
  };
  auto add_worker = [&](WorkerId id, std::uint32_t k) {
    Expect e{k % kGroups, 1 + (k / 2) % 3, k % 4 == 1 ? 1 : 0, k % 3 == 0};
    const auto contents = group_prompt(e.group);
    std::vector<KvEvent> events{Store(Hashes(id, 0, e.len), std::nullopt, Slice(contents, 0, e.len),
                                      e.tier == 1 ? "CPU" : "GPU")};
    if (e.own) events.push_back(Store({H(id, 10)}, std::nullopt, {100'000 + k}));
    index_.ApplyBatch(id, Batch(std::move(events)));
    expect[id] = e;
  };
  auto check_groups = [&](const KvIndex& index) {
    std::vector<std::map<WorkerId, WorkerMatch>> want(kGroups);
    for (const auto& [id, e] : expect) {
      WorkerMatch m = Match(id, 0, 0, 0, 0, e.len, e.stale);
      for (int t = e.tier; t < kNumTiers; ++t) m.depth[t] = e.len;  // its tier or a faster one
      want[e.group][id] = m;
    }
    for (std::uint32_t g = 0; g < kGroups; ++g) {
      ASSERT_EQ(ByWorker(index.Lookup(PromptKeys(keyer_, group_prompt(g)))), want[g]) << g;
    }
  };
  for (std::uint32_t k = 0; k < kWorkers; ++k) add_worker(1'000'000 + k, k);
  check_groups(index_);
  for (std::uint32_t k = 0; k < kWorkers; k += 3) {
    auto m = Look(std::vector<std::uint32_t>{100'000 + k});
    ASSERT_EQ(m.size(), 1u) << k;
    ASSERT_EQ(m[1'000'000 + k].any_depth, 1u) << k;
  }
  EXPECT_EQ(index_.stats().workers, kWorkers);

  // A worker at a high slot (32,997 when slots are given in order), which stored its own
  // block once, stores it again and 9 children of it: more than one copy and more than 7
  // children at a slot past 32,768.
  const WorkerId high = 1'000'000 + 32'997;
  const std::uint32_t own_content = 100'000 + 32'997;
  const BlockKey own = PromptKeys(keyer_, {own_content})[0];
  auto own_child = [&](std::uint32_t i) {
    return std::vector<BlockKey>{own, Child(own, 300'000 + i)};
  };
  std::vector<KvEvent> events{Store({H(high, 10)}, std::nullopt, {own_content})};
  for (std::uint32_t i = 0; i < 9; ++i) {
    events.push_back(Store({H(high, 20 + i)}, H(high, 10), {300'000 + i}));
  }
  index_.ApplyBatch(high, Batch(std::move(events)));
  index_.ApplyEvent(high, Remove({H(high, 10)}));  // one of its two copies
  for (std::uint32_t i = 0; i < 9; ++i) EXPECT_EQ(Look(own_child(i))[high].any_depth, 2u) << i;
  index_.ApplyEvent(high, Remove({H(high, 10)}));  // now a hole under 9 children
  EXPECT_TRUE(Look(own_child(0)).empty());
  index_.ApplyEvent(high, Store({H(high, 10)}, std::nullopt, {own_content}));
  EXPECT_EQ(Look(own_child(8))[high].any_depth, 2u);
  EXPECT_EQ(Look(own_child(9))[high].any_depth, 1u);

  // Remove every tenth worker, flag some others stale (many of them at high slots).
  for (std::uint32_t k = 5; k < kWorkers; k += 10) {
    index_.RemoveWorker(1'000'000 + k);
    expect.erase(1'000'000 + k);
  }
  for (std::uint32_t k = 7; k < kWorkers; k += 1000) {
    index_.MarkStale(1'000'000 + k);
    expect[1'000'000 + k].stale = true;
  }
  EXPECT_TRUE(Look(std::vector<std::uint32_t>{100'000 + 32'985}).empty());  // removed
  check_groups(index_);
  // New workers after removals (slots are free to be reused).
  for (std::uint32_t k = 0; k < 1000; ++k) add_worker(2'000'000 + k, 40'000 + k);
  EXPECT_EQ(index_.stats().workers, kWorkers - kWorkers / 10 + 1000);
  check_groups(index_);

  // Clears in the middle: every tenth worker (offset 4) empties; it stays a worker.
  for (std::uint32_t k = 4; k < kWorkers; k += 10) {
    index_.ApplyBatch(1'000'000 + k, Batch({AllBlocksCleared{}}));
    expect.erase(1'000'000 + k);
  }
  check_groups(index_);
  EXPECT_TRUE(Look(std::vector<std::uint32_t>{100'000 + 32'994}).empty());
  EXPECT_EQ(Look(std::vector<std::uint32_t>{100'000 + 32'997})[1'032'997].any_depth, 1u);

  KvIndex copy(keyer_);
  const std::string image = index_.Dump();
  ASSERT_TRUE(copy.Restore(image).has_value());
  EXPECT_EQ(copy.Dump(), image);
  EXPECT_EQ(StatsTuple(copy.stats()), StatsTuple(index_.stats()));
  check_groups(copy);
  EXPECT_EQ(ByWorker(copy.Lookup(own_child(3))), Look(own_child(3)));
}

// ---------------------------------------------------------------------------------------------
// Reference counts: a block stays until removed as often as stored, up to 255 copies.

TEST_F(IndexEdgeTest, DuplicateStoresOfOneBlockAreHeldUntilTheLastRemoval) {
  for (std::uint32_t copies : {1u, 2u, 3u, 255u}) {
    KvIndex index(keyer_);
    for (std::uint32_t c = 0; c < copies; ++c) {
      ApplySettled(index, 1, Store({H(1, 0)}, std::nullopt, {5}));
    }
    const auto keys = PromptKeys(keyer_, {5});
    EXPECT_EQ(index.stats().engine_hashes, 1u);
    for (std::uint32_t r = 1; r <= copies; ++r) {
      ApplySettled(index, 1, Remove({H(1, 0)}));
      EXPECT_EQ(ByWorker(index.Lookup(keys)).size(), r < copies ? 1u : 0u) << copies << " " << r;
    }
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 0u, 0u, 0u)) << copies;
    ApplySettled(index, 1, Remove({H(1, 0)}));
    EXPECT_EQ(index.counters().unknown_removals, 1u) << copies;
    EXPECT_EQ(index.counters().ref_overflow, 0u) << copies;
  }
}

TEST_F(IndexEdgeTest, StoresPastTwoHundredFiftyFiveCopiesAreCountedAsOverflowAndIgnored) {
  const auto keys = PromptKeys(keyer_, {5, 6});
  for (int c = 0; c < 300; ++c) ApplySettled(index_, 1, Store({H(1, 0)}, std::nullopt, {5}));
  EXPECT_EQ(index_.counters().ref_overflow, 45u);
  EXPECT_EQ(index_.counters().blocks_stored, 255u);
  // A salted hash of the same block cannot take a reference either: its mapping is not kept,
  // so a run naming it as parent has an unknown parent.
  ApplySettled(index_, 1, Store({H(1, 1)}, std::nullopt, {5}));
  EXPECT_EQ(index_.counters().ref_overflow, 46u);
  EXPECT_EQ(index_.stats().engine_hashes, 1u);
  ApplySettled(index_, 1, Store({H(1, 2)}, H(1, 1), {6}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  // Another tier counts on its own.
  ApplySettled(index_, 1, Store({H(1, 0)}, std::nullopt, {5}, "CPU"));
  ApplySettled(index_, 1, Store({H(1, 3)}, H(1, 0), {6}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 2, 2, 2, 2, 2));
  for (int r = 1; r <= 255; ++r) {
    ApplySettled(index_, 1, Remove({H(1, 0)}));
    const auto m = ByWorker(index_.Lookup(keys));
    ASSERT_EQ(m.at(1).depth[0], r < 255 ? 2u : 0u) << r;
  }
  // Block 0 on CPU, block 1 on GPU: CPU-or-faster covers both.
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 0, 2, 2, 2, 2));
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
  ApplySettled(index_, 1, Remove({H(1, 0)}));  // GPU's copies are gone
  EXPECT_EQ(index_.counters().unknown_removals, 1u);
  ApplySettled(index_, 1, Remove({H(1, 0)}, "CPU"));
  EXPECT_EQ(ByWorker(index_.Lookup(keys)).count(1), 0u);  // block 0 is only a hole now
  ApplySettled(index_, 1, Remove({H(1, 3)}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
}

TEST_F(IndexEdgeTest, AllBlocksClearedForgetsEveryCopyAndEveryHash) {
  const auto keys = PromptKeys(keyer_, {5, 6});
  for (int c = 0; c < 300; ++c) ApplySettled(index_, 1, Store({H(1, 0)}, std::nullopt, {5}));
  ApplySettled(index_, 1,
               Batch({Store({H(1, 0)}, std::nullopt, {5}, "CPU"),
                      Store({H(1, 1)}, std::nullopt, {5}, "CPU"), Store({H(1, 2)}, H(1, 1), {6})}));
  ApplySettled(index_, 2, Store({H(2, 0)}, std::nullopt, {5}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 2, 2, 2, 2, 2));
  ApplySettled(index_, 1, AllBlocksCleared{});
  auto m = ByWorker(index_.Lookup(keys));
  EXPECT_EQ(m.count(1), 0u);
  EXPECT_EQ(m[2], Match(2, 1, 1, 1, 1, 1));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, 1u, 1u, 1u));
  // Counts start over: the old hashes are unknown, one store is undone by one removal.
  ApplySettled(index_, 1, Remove({H(1, 0), H(1, 1)}));
  EXPECT_EQ(index_.counters().unknown_removals, 2u);
  ApplySettled(index_, 1, Store({H(1, 0)}, std::nullopt, {5}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 1, 1, 1, 1, 1));
  ApplySettled(index_, 1, Remove({H(1, 0)}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys)).count(1), 0u);
  EXPECT_EQ(index_.counters().ref_overflow, 45u);
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, 1u, 1u, 1u));
}

TEST_F(IndexEdgeTest, CopiesInTwoTiersAreCountedPerTier) {
  const auto keys = PromptKeys(keyer_, {5, 6});
  // GPU: 1, 2 or 3 copies; CPU: 3, 2 or 1; a child in GPU once.
  for (std::uint32_t gpu : {1u, 2u, 3u}) {
    KvIndex index(keyer_);
    const std::uint32_t cpu = 4 - gpu;
    for (std::uint32_t c = 0; c < gpu; ++c) {
      ApplySettled(index, 1, Store({H(1, 0)}, std::nullopt, {5}));
    }
    for (std::uint32_t c = 0; c < cpu; ++c) {
      ApplySettled(index, 1, Store({H(1, 0)}, std::nullopt, {5}, "CPU"));
    }
    ApplySettled(index, 1, Store({H(1, 1)}, H(1, 0), {6}));
    EXPECT_EQ(ByWorker(index.Lookup(keys))[1], Match(1, 2, 2, 2, 2, 2));
    for (std::uint32_t r = 1; r <= gpu; ++r) {
      ApplySettled(index, 1, Remove({H(1, 0)}));
      const std::uint32_t g = r < gpu ? 2 : 0;
      EXPECT_EQ(ByWorker(index.Lookup(keys))[1], Match(1, g, 2, 2, 2, 2)) << gpu << " " << r;
    }
    for (std::uint32_t r = 1; r <= cpu; ++r) {
      ApplySettled(index, 1, Remove({H(1, 0)}, "CPU"));
      const auto m = ByWorker(index.Lookup(keys));
      if (r < cpu) {
        // Block 0 on CPU, block 1 on GPU: CPU-or-faster covers both.
        EXPECT_EQ(m.at(1), Match(1, 0, 2, 2, 2, 2)) << gpu << " " << r;
      } else {
        EXPECT_EQ(m.count(1), 0u) << gpu;  // block 0 is only a hole under the child now
      }
    }
    // The mapping of H(1, 0) is gone with its last copy: a new child naming it is unknown.
    ApplySettled(index, 1, Store({H(1, 2)}, H(1, 0), {7}));
    EXPECT_EQ(index.counters().unknown_parent_runs, 1u);
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 2u, 1u, 1u)) << gpu;
  }
}

// ---------------------------------------------------------------------------------------------
// Kids counts around 7/8 and 254/255/256 in one worker and tier, with holes.

// In each tier: an inline entry keeps each tier's count in its own bits.
// A chain of kP blocks, then P at position kP and its children at kP + 1 (prompts of kP + 2
// keys), all held by one worker (one holder per block: the compact layout's inline form when
// the counts are small). A lookup probes such a prompt at a few positions only (a gallop: 1,
// 3, 7, ..., the end) and the worker's count of lanes is the same at both ends, so a missing P
// is found only through the worker's hole bookkeeping, which reads P's kids count.
constexpr std::uint32_t kP = 50;

std::vector<std::uint32_t> ChainToP() {
  std::vector<std::uint32_t> contents(kP + 1);
  for (std::uint32_t i = 0; i <= kP; ++i) contents[i] = 1 + i;
  return contents;
}

// In each tier: an inline entry keeps each tier's count in its own bits.
TEST_F(IndexEdgeTest, ChildCountsAroundSmallAndByteBoundariesStayExactWithHoles) {
  const auto chain = PromptKeys(keyer_, ChainToP());
  for (const std::string medium : {"GPU", "CPU", "DISK", "SHARED"}) {
    const int t = static_cast<int>(*TierFromMedium(medium));
    for (std::uint32_t kids : {6u, 7u, 8u, 9u, 253u, 254u, 255u, 256u, 257u}) {
      SCOPED_TRACE(medium + " kids=" + std::to_string(kids));
      KvIndex index(keyer_);
      // Worker 1 holds the chain (hashes H(1, 0..kP), P = H(1, kP)) and `kids` children of P
      // (content 1000 + i, hash H(1, 1000 + i)), all in one tier.
      auto prompt = [&](std::uint32_t i) {
        auto keys = chain;
        keys.push_back(Child(chain[kP], 1000 + i));
        return keys;
      };
      auto depth = [&](std::uint32_t i) {
        auto m = ByWorker(index.Lookup(prompt(i)));
        return m.count(1) ? m[1].depth[t] : 0u;
      };
      ApplySettled(index, 1, Store(Hashes(1, 0, kP + 1), std::nullopt, ChainToP(), medium));
      for (std::uint32_t i = 0; i < kids; ++i) {
        ApplySettled(index, 1, Store({H(1, 1000 + i)}, H(1, kP), {1000 + i}, medium));
        ASSERT_EQ(depth(i), kP + 2) << i;
        if (i > 0) {
          ASSERT_EQ(depth(i - 1), kP + 2) << i;
        }
        ASSERT_EQ(depth(i + 1), kP + 1) << i;
      }
      EXPECT_EQ(index.stats().nodes, kP + 1 + kids);
      // A hole: P removed while its children stay.
      ApplySettled(index, 1, Remove({H(1, kP)}, medium));
      for (std::uint32_t i = 0; i <= kids; ++i) ASSERT_EQ(depth(i), kP) << i;
      // Children go one by one through the boundaries again; the hole stays while any is left.
      for (std::uint32_t i = 0; i + 1 < kids; ++i) {
        ApplySettled(index, 1, Remove({H(1, 1000 + i)}, medium));
        ASSERT_EQ(depth(i), kP) << i;
        ASSERT_EQ(depth(kids - 1), kP) << i;
      }
      // P back: the last child is reachable again, the removed ones are not.
      ApplySettled(index, 1, Store({H(1, kP)}, H(1, kP - 1), {kP + 1}, medium));
      EXPECT_EQ(depth(kids - 1), kP + 2);
      EXPECT_EQ(depth(0), kP + 1);
      EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, kP + 2, kP + 2, kP + 2));
      // And up again past the boundary with P held, a hole again, then a clear in the middle.
      for (std::uint32_t i = 0; i + 1 < kids; ++i) {
        ApplySettled(index, 1, Store({H(1, 1000 + i)}, H(1, kP), {1000 + i}, medium));
      }
      for (std::uint32_t i = 0; i < kids; ++i) ASSERT_EQ(depth(i), kP + 2) << i;
      ApplySettled(index, 1, Remove({H(1, kP)}, medium));
      for (std::uint32_t i = 0; i < kids; ++i) ASSERT_EQ(depth(i), kP) << i;
      ApplySettled(index, 1, AllBlocksCleared{});
      for (std::uint32_t i = 0; i < kids; ++i) ASSERT_EQ(depth(i), 0u) << i;
      EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 0u, 0u, 0u));
    }
  }
}

// One entry with children in all four tiers at once, each near the inline limit of 7: the
// counts stay apart as one tier crosses to 8 and back, and as holes.
TEST_F(IndexEdgeTest, ChildCountsOfFourTiersInOneEntryStayApart) {
  const std::array<std::string, kNumTiers> media{"GPU", "CPU", "DISK", "SHARED"};
  std::array<std::uint32_t, kNumTiers> count{7, 6, 7, 5};
  const auto chain = PromptKeys(keyer_, ChainToP());
  bool hole = false;  // P removed from every tier of worker 1
  auto check = [&](int line) {
    for (std::uint32_t i = 0; i < 10; ++i) {
      WorkerMatch want = Match(1, 0, 0, 0, 0, kP + 1);
      bool child_here_or_faster = false;  // a tier's depth counts the faster tiers' blocks
      for (int t = 0; t < kNumTiers; ++t) {
        child_here_or_faster = child_here_or_faster || i < count[t];
        want.depth[t] = child_here_or_faster ? kP + 2 : kP + 1;
        if (i < count[t]) want.any_depth = kP + 2;
      }
      if (hole) want = Match(1, kP, kP, kP, kP, kP);
      auto prompt = chain;
      prompt.push_back(Child(chain[kP], 1000 + i));
      ASSERT_EQ(Look(prompt)[1], want) << "line " << line << " child " << i;
    }
  };
  for (int t = 0; t < kNumTiers; ++t) {
    ApplySettled(index_, 1, Store(Hashes(1, 0, kP + 1), std::nullopt, ChainToP(), media[t]));
    for (std::uint32_t i = 0; i < count[t]; ++i) {
      ApplySettled(index_, 1, Store({H(1, 1000 + i)}, H(1, kP), {1000 + i}, media[t]));
    }
  }
  check(__LINE__);
  for (int t = 0; t < kNumTiers; ++t) {
    // Tier t up to 8 and 9, then back to its count.
    const std::uint32_t before = count[t];
    while (count[t] < 9) {
      ApplySettled(index_, 1,
                   Store({H(1, 1000 + count[t])}, H(1, kP), {1000 + count[t]}, media[t]));
      ++count[t];
      check(__LINE__);
    }
    while (count[t] > before) {
      --count[t];
      ApplySettled(index_, 1, Remove({H(1, 1000 + count[t])}, media[t]));
      check(__LINE__);
    }
  }
  // P leaves every tier: holes in all four, each kept by its own count.
  for (int t = 0; t < kNumTiers; ++t) ApplySettled(index_, 1, Remove({H(1, kP)}, media[t]));
  hole = true;
  check(__LINE__);
  for (int t = 0; t < kNumTiers; ++t) {
    while (count[t] > 1) {
      --count[t];
      ApplySettled(index_, 1, Remove({H(1, 1000 + count[t])}, media[t]));
      check(__LINE__);
    }
  }
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
}

}  // namespace
}  // namespace kvroute::kv
