// Black-box edge cases of KvIndex at the boundaries of a compact node layout: chains deeper
// than 65,535 blocks, a block with more than 65,535 children, worker slots past 32,768,
// reference counts 1/2/3/300 (saturating at 255), kids counts around 7/8 and 254..256, several
// engine hashes naming one block in one worker (cache_salt), workers whose hashes are keys
// until one is not, and AllBlocksCleared in the middle of each. Only the public API (apply,
// Lookup, RemoveWorker, staleness, counters, stats, Dump/Restore) is used, so these tests hold
// whatever the internal layout. Expectations are computed by hand from what each test stored,
// or by a std::map reference model (the randomized test at the end).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "kv/index.h"
#include "kv/index_test_util.h"

namespace kvroute::kv {
namespace {

using testing::Batch;
using testing::ByWorker;
using testing::Match;
using testing::PromptKeys;
using testing::Remove;
using testing::Store;
using testing::TokensOf;

// An engine hash of worker w's i-th block: never equal to a canonical key in practice.
EngineHash H(std::uint64_t w, std::uint64_t i) { return (w << 40) ^ (0x5A5A0000ULL + i); }

std::vector<EngineHash> Hashes(std::uint64_t w, std::uint32_t from, std::uint32_t to) {
  std::vector<EngineHash> out;
  for (std::uint32_t i = from; i < to; ++i) out.push_back(H(w, i));
  return out;
}

std::vector<std::uint32_t> Slice(const std::vector<std::uint32_t>& v, std::uint32_t from,
                                 std::uint32_t to) {
  return {v.begin() + from, v.begin() + to};
}

auto StatsTuple(const IndexStats& s) {
  return std::tuple{s.workers, s.nodes, s.entries, s.engine_hashes};
}

class IndexEdgeTest : public ::testing::Test {
 protected:
  std::map<WorkerId, WorkerMatch> Look(std::span<const BlockKey> keys) const {
    return ByWorker(index_.Lookup(keys));
  }
  std::map<WorkerId, WorkerMatch> Look(const std::vector<std::uint32_t>& contents) const {
    return ByWorker(index_.Lookup(PromptKeys(keyer_, contents)));
  }
  // The key of a one-block continuation with content c under `parent`.
  BlockKey Child(BlockKey parent, std::uint32_t c) const {
    const std::vector<TokenId> tokens = TokensOf({c});
    return keyer_.Next(parent, tokens);
  }
  // A copy restored from a snapshot must dump the same bytes and answer the same lookups.
  void ExpectRestoredCopyAgrees(const std::vector<std::vector<BlockKey>>& prompts) {
    KvIndex copy(keyer_);
    const std::string image = index_.Dump();
    auto restored = copy.Restore(image);
    ASSERT_TRUE(restored.has_value()) << restored.error();
    EXPECT_EQ(copy.Dump(), image);
    EXPECT_EQ(StatsTuple(copy.stats()), StatsTuple(index_.stats()));
    for (const auto& keys : prompts) {
      EXPECT_EQ(ByWorker(copy.Lookup(keys)), Look(keys)) << "prompt of " << keys.size();
    }
  }

  BlockKeyer keyer_;
  KvIndex index_{keyer_};
};

// ---------------------------------------------------------------------------------------------
// Chains deeper than 65,535 blocks.

class IndexDeepChainTest : public IndexEdgeTest {
 protected:
  static constexpr std::uint32_t kDeep = 70'000;
  static constexpr std::uint32_t kRun = 10'000;

  void SetUp() override {
    contents_.resize(kDeep);
    for (std::uint32_t i = 0; i < kDeep; ++i) contents_[i] = i + 1;
    keys_ = PromptKeys(keyer_, contents_);
    // Worker 1: the whole chain in GPU, in 7 runs chained by parent hash.
    for (std::uint32_t from = 0; from < kDeep; from += kRun) {
      std::optional<EngineHash> parent;
      if (from > 0) parent = H(1, from - 1);
      index_.ApplyEvent(
          1, Store(Hashes(1, from, from + kRun), parent, Slice(contents_, from, from + kRun)));
    }
    // Worker 2: the first 65,537 blocks in CPU, in one run.
    index_.ApplyEvent(2, Store(Hashes(2, 0, kW2), std::nullopt, Slice(contents_, 0, kW2), "CPU"));
  }
  std::vector<BlockKey> Prefix(std::uint32_t n) const { return {keys_.begin(), keys_.begin() + n}; }
  // The chain's first `at` blocks, then 100 blocks of other content (a real prompt: lookups
  // may assume the keys form one chain).
  std::vector<BlockKey> DivergingAt(std::uint32_t at) const {
    std::vector<BlockKey> keys(keys_.begin(), keys_.begin() + at);
    for (std::uint32_t j = 0; j < 100; ++j) {
      keys.push_back(Child(keys.empty() ? keyer_.Root() : keys.back(), 0xABCDEF + j));
    }
    return keys;
  }

  static constexpr std::uint32_t kW2 = 65'537;
  std::vector<std::uint32_t> contents_;
  std::vector<BlockKey> keys_;
};

TEST_F(IndexDeepChainTest, PrefixLookupsAroundTheSixteenBitBoundaryReturnExactDepths) {
  for (std::uint32_t n : {1u, 65'533u, 65'534u, 65'535u, 65'536u, 65'537u, 65'538u, kDeep}) {
    auto m = Look(Prefix(n));
    ASSERT_EQ(m.size(), 2u) << n;
    EXPECT_EQ(m[1], Match(1, n, 0, 0, 0, n)) << n;
    const std::uint32_t w2 = std::min(n, kW2);
    EXPECT_EQ(m[2], Match(2, 0, w2, 0, 0, w2)) << n;
  }
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, kDeep, kDeep + kW2, kDeep + kW2));
}

TEST_F(IndexDeepChainTest, PromptsDivergingPastTheSixteenBitBoundaryStopThere) {
  for (std::uint32_t at : {65'533u, 65'534u, 65'535u, 65'536u, 65'537u, 69'999u}) {
    auto m = Look(DivergingAt(at));
    EXPECT_EQ(m[1], Match(1, at, 0, 0, 0, at)) << at;
    const std::uint32_t w2 = std::min(at, kW2);
    EXPECT_EQ(m[2], Match(2, 0, w2, 0, 0, w2)) << at;
  }
}

TEST_F(IndexDeepChainTest, HolesPastTheSixteenBitBoundaryStopTheMatch) {
  // The tail, then holes in the middle (blocks after them stay held).
  index_.ApplyEvent(1, Remove({H(1, kDeep - 1)}));
  EXPECT_EQ(Look(keys_)[1], Match(1, kDeep - 1, 0, 0, 0, kDeep - 1));
  index_.ApplyEvent(1, Remove({H(1, 67'000)}));
  EXPECT_EQ(Look(keys_)[1], Match(1, 67'000, 0, 0, 0, 67'000));
  index_.ApplyEvent(1, Remove({H(1, 65'536)}));
  auto m = Look(keys_);
  EXPECT_EQ(m[1], Match(1, 65'536, 0, 0, 0, 65'536));
  EXPECT_EQ(m[2], Match(2, 0, kW2, 0, 0, kW2));
  for (std::uint32_t n : {65'535u, 65'536u, 65'537u, 67'000u, 67'001u, 67'002u}) {
    EXPECT_EQ(Look(Prefix(n))[1].depth[0], std::min(n, 65'536u)) << n;
  }
  // The tail node goes (nobody holds it, no children); the two holes stay as nodes.
  EXPECT_EQ(StatsTuple(index_.stats()),
            std::tuple(2u, kDeep - 1, kDeep - 3 + kW2, kDeep - 3 + kW2));

  // Worker 2 gets a hole exactly at depth 65,535 under its last block.
  index_.ApplyEvent(2, Remove({H(2, 65'535)}, "CPU"));
  EXPECT_EQ(Look(keys_)[2], Match(2, 0, 65'535, 0, 0, 65'535));

  // Filling worker 1's first hole moves it to the next one.
  index_.ApplyEvent(1, Store({H(1, 65'536)}, H(1, 65'535), {contents_[65'536]}));
  EXPECT_EQ(Look(keys_)[1], Match(1, 67'000, 0, 0, 0, 67'000));

  // A branch off depth 66,000: its block is at depth 66,001.
  index_.ApplyEvent(1, Store({H(1, 900'000)}, H(1, 66'000), {999'999}));
  auto branch = Prefix(66'001);
  branch.push_back(Child(keys_[66'000], 999'999));
  m = Look(branch);
  EXPECT_EQ(m[1], Match(1, 66'002, 0, 0, 0, 66'002));
  EXPECT_EQ(m[2], Match(2, 0, 65'535, 0, 0, 65'535));

  ExpectRestoredCopyAgrees({keys_, branch, Prefix(65'536), Prefix(67'001), DivergingAt(65'535)});
}

TEST_F(IndexDeepChainTest, AllBlocksClearedOfTheDeepWorkerLeavesTheOtherExact) {
  index_.ApplyEvent(2, Remove({H(2, 65'535)}, "CPU"));
  index_.ApplyBatch(1, Batch({AllBlocksCleared{}}));
  auto m = Look(keys_);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[2], Match(2, 0, 65'535, 0, 0, 65'535));
  // Worker 2 keeps 0..65,536 but 65,535 (a hole node).
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, kW2, kW2 - 1, kW2 - 1));
  // Worker 1 stores the chain again past the boundary; its old hashes were forgotten.
  index_.ApplyEvent(1, Store({H(1, 65'537)}, H(1, 65'536), {contents_[65'537]}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  index_.ApplyEvent(1, Store(Hashes(1, 0, 65'540), std::nullopt, Slice(contents_, 0, 65'540)));
  EXPECT_EQ(Look(keys_)[1], Match(1, 65'540, 0, 0, 0, 65'540));
  ExpectRestoredCopyAgrees({keys_, Prefix(65'536)});
}

// ---------------------------------------------------------------------------------------------
// One block with more than 65,535 children.

class IndexWideFanOutTest : public IndexEdgeTest {
 protected:
  static constexpr std::uint32_t kKids = 70'000;
  // Worker 1 holds children [0, 40,000), worker 2 [30,000, 70,000); both hold the parent.
  static constexpr std::uint32_t kW1End = 40'000;
  static constexpr std::uint32_t kW2Begin = 30'000;

  void SetUp() override {
    root_ = PromptKeys(keyer_, {0})[0];
    for (WorkerId w : {1u, 2u}) index_.ApplyEvent(w, Store({H(w, 0)}, std::nullopt, {0}));
    StoreKids(1, 0, kW1End);
    StoreKids(2, kW2Begin, kKids);
  }
  // Child i has content i + 1 and engine hash H(w, i + 1), one event each (a batch of 1,000).
  void StoreKids(WorkerId w, std::uint32_t from, std::uint32_t to) {
    for (std::uint32_t b = from; b < to; b += 1000) {
      std::vector<KvEvent> events;
      for (std::uint32_t i = b; i < std::min(to, b + 1000); ++i) {
        events.push_back(Store({H(w, i + 1)}, H(w, 0), {i + 1}));
      }
      index_.ApplyBatch(w, Batch(std::move(events)));
    }
  }
  void RemoveKids(WorkerId w, std::uint32_t from, std::uint32_t to) {
    std::vector<EngineHash> hashes;
    for (std::uint32_t i = from; i < to; ++i) hashes.push_back(H(w, i + 1));
    index_.ApplyEvent(w, Remove(std::move(hashes)));
  }
  std::vector<BlockKey> KidPrompt(std::uint32_t i) const { return {root_, Child(root_, i + 1)}; }

  BlockKey root_ = 0;
};

TEST_F(IndexWideFanOutTest, LookupsOfContinuationsAreExactPerWorker) {
  for (std::uint32_t i :
       {0u, 29'999u, 30'000u, 39'999u, 40'000u, 65'534u, 65'535u, 65'536u, 69'999u, 70'000u}) {
    auto m = Look(KidPrompt(i));
    ASSERT_EQ(m.size(), 2u) << i;
    const std::uint32_t d1 = i < kW1End ? 2 : 1;
    const std::uint32_t d2 = (i >= kW2Begin && i < kKids) ? 2 : 1;
    EXPECT_EQ(m[1], Match(1, d1, 0, 0, 0, d1)) << i;
    EXPECT_EQ(m[2], Match(2, d2, 0, 0, 0, d2)) << i;
  }
  const std::size_t held = 2 + kW1End + (kKids - kW2Begin);
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, 1 + kKids, held, held));
}

TEST_F(IndexWideFanOutTest, ChildCountDownThroughTheSixteenBitBoundaryAndBackStaysExact) {
  // Children [0, 30,000) are worker 1's alone: removing them one by one drops the parent's
  // child count from 70,000 to 40,000, through 65,535.
  constexpr std::uint32_t kFirstChecked = kKids - 65'538;  // leaves 65,538 children
  RemoveKids(1, 0, kFirstChecked);
  for (std::uint32_t i = kFirstChecked; i < kFirstChecked + 5; ++i) {
    RemoveKids(1, i, i + 1);
    const std::uint32_t kids = kKids - i - 1;
    EXPECT_EQ(index_.stats().nodes, 1u + kids) << kids;
    auto gone = Look(KidPrompt(i));
    EXPECT_EQ(gone[1].depth[0], 1u) << kids;
    EXPECT_EQ(gone.count(2) ? gone[2].depth[0] : 0u, 1u) << kids;
    EXPECT_EQ(Look(KidPrompt(i + 1))[1].depth[0], 2u) << kids;
    EXPECT_EQ(Look(KidPrompt(65'535))[2].depth[0], 2u) << kids;
  }
  // 65,533 children now; back up one by one, then all the way.
  for (std::uint32_t i = kFirstChecked + 4; i + 1 > kFirstChecked; --i) {
    StoreKids(1, i, i + 1);
    EXPECT_EQ(index_.stats().nodes, 1u + kKids - i) << i;
    EXPECT_EQ(Look(KidPrompt(i))[1].depth[0], 2u) << i;
  }
  StoreKids(1, 0, kFirstChecked);
  EXPECT_EQ(index_.stats().nodes, 1u + kKids);
  for (std::uint32_t i : {0u, 4'461u, 4'462u, 29'999u}) {
    EXPECT_EQ(Look(KidPrompt(i))[1], Match(1, 2, 0, 0, 0, 2)) << i;
  }
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
}

TEST_F(IndexWideFanOutTest, RemovingEverythingEmptiesTheIndex) {
  // The parent first (a hole under 40,000 held children), then the children, then worker 2.
  index_.ApplyEvent(1, Remove({H(1, 0)}));
  auto m = Look(KidPrompt(10));
  EXPECT_EQ(m.count(1), 0u);  // worker 1 no longer holds block 0
  EXPECT_EQ(m[2], Match(2, 1, 0, 0, 0, 1));
  EXPECT_EQ(Look(KidPrompt(35'000))[2].depth[0], 2u);
  ExpectRestoredCopyAgrees({KidPrompt(0), KidPrompt(35'000), KidPrompt(69'999)});
  RemoveKids(1, 0, kW1End);
  EXPECT_EQ(index_.stats().nodes, 1u + (kKids - kW2Begin));
  RemoveKids(2, kW2Begin, kKids);
  index_.ApplyEvent(2, Remove({H(2, 0)}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, 0u, 0u, 0u));
  EXPECT_TRUE(Look(KidPrompt(35'000)).empty());
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
}

TEST_F(IndexWideFanOutTest, AllBlocksClearedOfOneWorkerKeepsTheOthersChildren) {
  index_.ApplyEvent(1, Remove({H(1, 0)}));  // worker 1: a hole over its children
  index_.ApplyBatch(2, Batch({AllBlocksCleared{}}));
  // Nobody holds block 0 now, but worker 1's children keep it as a node.
  EXPECT_TRUE(Look(KidPrompt(5)).empty());
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, 1 + kW1End, kW1End, kW1End));
  index_.ApplyEvent(1, Store({H(1, 0)}, std::nullopt, {0}));
  EXPECT_EQ(Look(KidPrompt(5))[1].depth[0], 2u);
  EXPECT_EQ(Look(KidPrompt(45'000))[1].depth[0], 1u);
  index_.ApplyBatch(1, Batch({AllBlocksCleared{}}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, 0u, 0u, 0u));
}

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
    for (std::uint32_t g = 0; g < kGroups; ++g) {
      std::map<WorkerId, WorkerMatch> want;
      for (const auto& [id, e] : expect) {
        if (e.group != g) continue;
        WorkerMatch m = Match(id, 0, 0, 0, 0, e.len, e.stale);
        m.depth[e.tier] = e.len;
        want[id] = m;
      }
      ASSERT_EQ(ByWorker(index.Lookup(PromptKeys(keyer_, group_prompt(g)))), want) << g;
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
}

// ---------------------------------------------------------------------------------------------
// Reference counts: a block stays until removed as often as stored, up to 255 copies.

TEST_F(IndexEdgeTest, DuplicateStoresOfOneBlockAreHeldUntilTheLastRemoval) {
  for (std::uint32_t copies : {1u, 2u, 3u, 255u}) {
    KvIndex index(keyer_);
    for (std::uint32_t c = 0; c < copies; ++c) {
      index.ApplyEvent(1, Store({H(1, 0)}, std::nullopt, {5}));
    }
    const auto keys = PromptKeys(keyer_, {5});
    EXPECT_EQ(index.stats().engine_hashes, 1u);
    for (std::uint32_t r = 1; r <= copies; ++r) {
      index.ApplyEvent(1, Remove({H(1, 0)}));
      EXPECT_EQ(ByWorker(index.Lookup(keys)).size(), r < copies ? 1u : 0u) << copies << " " << r;
    }
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 0u, 0u, 0u)) << copies;
    index.ApplyEvent(1, Remove({H(1, 0)}));
    EXPECT_EQ(index.counters().unknown_removals, 1u) << copies;
    EXPECT_EQ(index.counters().ref_overflow, 0u) << copies;
  }
}

TEST_F(IndexEdgeTest, StoresPastTwoHundredFiftyFiveCopiesAreCountedAsOverflowAndIgnored) {
  const auto keys = PromptKeys(keyer_, {5, 6});
  for (int c = 0; c < 300; ++c) index_.ApplyEvent(1, Store({H(1, 0)}, std::nullopt, {5}));
  EXPECT_EQ(index_.counters().ref_overflow, 45u);
  EXPECT_EQ(index_.counters().blocks_stored, 255u);
  // A salted hash of the same block cannot take a reference either: its mapping is not kept,
  // so a run naming it as parent has an unknown parent.
  index_.ApplyEvent(1, Store({H(1, 1)}, std::nullopt, {5}));
  EXPECT_EQ(index_.counters().ref_overflow, 46u);
  EXPECT_EQ(index_.stats().engine_hashes, 1u);
  index_.ApplyEvent(1, Store({H(1, 2)}, H(1, 1), {6}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  // Another tier counts on its own.
  index_.ApplyEvent(1, Store({H(1, 0)}, std::nullopt, {5}, "CPU"));
  index_.ApplyEvent(1, Store({H(1, 3)}, H(1, 0), {6}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 2, 1, 0, 0, 2));
  for (int r = 1; r <= 255; ++r) {
    index_.ApplyEvent(1, Remove({H(1, 0)}));
    const auto m = ByWorker(index_.Lookup(keys));
    ASSERT_EQ(m.at(1).depth[0], r < 255 ? 2u : 0u) << r;
  }
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 0, 1, 0, 0, 2));
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
  index_.ApplyEvent(1, Remove({H(1, 0)}));  // GPU's copies are gone
  EXPECT_EQ(index_.counters().unknown_removals, 1u);
  index_.ApplyEvent(1, Remove({H(1, 0)}, "CPU"));
  EXPECT_EQ(ByWorker(index_.Lookup(keys)).count(1), 0u);  // block 0 is only a hole now
  index_.ApplyEvent(1, Remove({H(1, 3)}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
}

TEST_F(IndexEdgeTest, CopiesInTwoTiersAreCountedPerTier) {
  const auto keys = PromptKeys(keyer_, {5, 6});
  // GPU: 1, 2 or 3 copies; CPU: 3, 2 or 1; a child in GPU once.
  for (std::uint32_t gpu : {1u, 2u, 3u}) {
    KvIndex index(keyer_);
    const std::uint32_t cpu = 4 - gpu;
    for (std::uint32_t c = 0; c < gpu; ++c) {
      index.ApplyEvent(1, Store({H(1, 0)}, std::nullopt, {5}));
    }
    for (std::uint32_t c = 0; c < cpu; ++c) {
      index.ApplyEvent(1, Store({H(1, 0)}, std::nullopt, {5}, "CPU"));
    }
    index.ApplyEvent(1, Store({H(1, 1)}, H(1, 0), {6}));
    EXPECT_EQ(ByWorker(index.Lookup(keys))[1], Match(1, 2, 1, 0, 0, 2));
    for (std::uint32_t r = 1; r <= gpu; ++r) {
      index.ApplyEvent(1, Remove({H(1, 0)}));
      const std::uint32_t g = r < gpu ? 2 : 0;
      EXPECT_EQ(ByWorker(index.Lookup(keys))[1], Match(1, g, 1, 0, 0, 2)) << gpu << " " << r;
    }
    for (std::uint32_t r = 1; r <= cpu; ++r) {
      index.ApplyEvent(1, Remove({H(1, 0)}, "CPU"));
      const auto m = ByWorker(index.Lookup(keys));
      if (r < cpu) {
        EXPECT_EQ(m.at(1), Match(1, 0, 1, 0, 0, 2)) << gpu << " " << r;
      } else {
        EXPECT_EQ(m.count(1), 0u) << gpu;  // block 0 is only a hole under the child now
      }
    }
    // The mapping of H(1, 0) is gone with its last copy: a new child naming it is unknown.
    index.ApplyEvent(1, Store({H(1, 2)}, H(1, 0), {7}));
    EXPECT_EQ(index.counters().unknown_parent_runs, 1u);
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 2u, 1u, 1u)) << gpu;
  }
}

// ---------------------------------------------------------------------------------------------
// Kids counts around 7/8 and 254/255/256 in one worker and tier, with holes.

TEST_F(IndexEdgeTest, ChildCountsAroundSmallAndByteBoundariesStayExactWithHoles) {
  for (std::uint32_t kids : {6u, 7u, 8u, 9u, 253u, 254u, 255u, 256u, 257u}) {
    SCOPED_TRACE("kids=" + std::to_string(kids));
    KvIndex index(keyer_);
    // Chain R -> P, then `kids` children of P (content 1000 + i), all in worker 1, GPU.
    const auto rp = PromptKeys(keyer_, {1, 2});
    auto prompt = [&](std::uint32_t i) {
      return std::vector<BlockKey>{rp[0], rp[1], Child(rp[1], 1000 + i)};
    };
    auto depth = [&](std::uint32_t i) {
      auto m = ByWorker(index.Lookup(prompt(i)));
      return m.count(1) ? m[1].depth[0] : 0u;
    };
    index.ApplyEvent(1, Store({H(1, 0), H(1, 1)}, std::nullopt, {1, 2}));
    // A second worker holds R and P only, so P stays a node with its own entry.
    index.ApplyEvent(2, Store({H(2, 0), H(2, 1)}, std::nullopt, {1, 2}));
    for (std::uint32_t i = 0; i < kids; ++i) {
      index.ApplyEvent(1, Store({H(1, 10 + i)}, H(1, 1), {1000 + i}));
      ASSERT_EQ(depth(i), 3u) << i;
      if (i > 0) {
        ASSERT_EQ(depth(i - 1), 3u) << i;
      }
      ASSERT_EQ(depth(i + 1), 2u) << i;
    }
    EXPECT_EQ(index.stats().nodes, 2u + kids);
    // A hole: P removed while its children stay.
    index.ApplyEvent(1, Remove({H(1, 1)}));
    for (std::uint32_t i = 0; i <= kids; ++i) ASSERT_EQ(depth(i), 1u) << i;
    EXPECT_EQ(ByWorker(index.Lookup(prompt(0)))[2].depth[0], 2u);
    // Children go one by one through the boundaries again; the hole stays while any is left.
    for (std::uint32_t i = 0; i + 1 < kids; ++i) {
      index.ApplyEvent(1, Remove({H(1, 10 + i)}));
      ASSERT_EQ(depth(i), 1u) << i;
      ASSERT_EQ(depth(kids - 1), 1u) << i;
    }
    // P back: the last child is reachable again, the removed ones are not.
    index.ApplyEvent(1, Store({H(1, 1)}, H(1, 0), {2}));
    EXPECT_EQ(depth(kids - 1), 3u);
    EXPECT_EQ(depth(0), 2u);
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(2u, 3u, 5u, 5u));
    // And up again past the boundary with P held, then a clear in the middle.
    for (std::uint32_t i = 0; i + 1 < kids; ++i) {
      index.ApplyEvent(1, Store({H(1, 10 + i)}, H(1, 1), {1000 + i}));
    }
    for (std::uint32_t i = 0; i < kids; ++i) ASSERT_EQ(depth(i), 3u) << i;
    index.ApplyEvent(1, AllBlocksCleared{});
    for (std::uint32_t i = 0; i < kids; ++i) ASSERT_EQ(depth(i), 0u) << i;
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(2u, 2u, 2u, 2u));
  }
}

// ---------------------------------------------------------------------------------------------
// Several engine hashes naming one block in one worker (what cache_salt does: same tokens,
// same parent, different block hashes).

// Hashes A..E of block {5} and, per hash, a child {6}; worker 1. With `keyed`, A and its child
// are kvroute's own keys, so the worker starts without an engine map and switches at B.
class IndexSaltedHashesTest : public IndexEdgeTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    keys_ = PromptKeys(keyer_, {5, 6, 7});
    const bool keyed = GetParam();
    a_ = keyed ? keys_[0] : 11;
    a1_ = keyed ? keys_[1] : 21;
  }
  bool Held(const KvIndex& index, std::size_t depth) const {
    auto m = ByWorker(index.Lookup(keys_));
    return m.count(1) && m[1].depth[0] == depth;
  }
  std::uint32_t Depth(const KvIndex& index) const {
    auto m = ByWorker(index.Lookup(keys_));
    return m.count(1) ? m[1].depth[0] : 0;
  }
  static constexpr EngineHash kB = 12, kC = 13, kD = 14, kE = 15;
  std::vector<BlockKey> keys_;
  EngineHash a_ = 0, a1_ = 0;
};

TEST_P(IndexSaltedHashesTest, BlockIsHeldUntilItsLastHashIsRemovedInEveryOrder) {
  std::array<EngineHash, 3> order{kB, kC, kD};
  do {
    SCOPED_TRACE(::testing::Message() << "order " << order[0] << order[1] << order[2]);
    KvIndex index(keyer_);
    for (EngineHash h : {a_, kB, kC}) index.ApplyEvent(1, Store({h}, std::nullopt, {5}));
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 1u, 1u, 3u));
    index.ApplyEvent(1, Remove({a_}));  // the first hash goes, the block stays
    EXPECT_EQ(Depth(index), 1u);
    EXPECT_EQ(index.stats().engine_hashes, 2u);
    index.ApplyEvent(1, Remove({a_}));
    EXPECT_EQ(index.counters().unknown_removals, 1u);
    index.ApplyEvent(1, Store({kD}, std::nullopt, {5}));
    EXPECT_EQ(index.stats().engine_hashes, 3u);
    for (std::size_t k = 0; k < order.size(); ++k) {
      index.ApplyEvent(1, Remove({order[k]}));
      EXPECT_EQ(Depth(index), k + 1 < order.size() ? 1u : 0u) << k;
      EXPECT_EQ(index.stats().engine_hashes, order.size() - k - 1) << k;
    }
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 0u, 0u, 0u));
    // Removed hashes are unknown, as removals and as parents; a new hash stores it again.
    index.ApplyEvent(1, Remove({order[0], 99}));
    EXPECT_EQ(index.counters().unknown_removals, 3u);
    index.ApplyEvent(1, Store({31}, kB, {6}));
    EXPECT_EQ(index.counters().unknown_parent_runs, 1u);
    index.ApplyEvent(1, Store({kE}, std::nullopt, {5}));
    index.ApplyEvent(1, Store({32}, kE, {6}));
    EXPECT_EQ(Depth(index), 2u);
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 2u, 2u, 2u));
    EXPECT_EQ(index.counters().hash_conflicts, 0u);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST_P(IndexSaltedHashesTest, ChainsContinuingFromEachHashShareOneCanonicalChain) {
  for (EngineHash h : {a_, kB, kC}) index_.ApplyEvent(1, Store({h}, std::nullopt, {5}));
  // A child under each hash (one canonical child), a grandchild under B's child.
  index_.ApplyBatch(1, Batch({Store({a1_}, a_, {6}), Store({22}, kB, {6}), Store({23}, kC, {6}),
                              Store({41}, 22, {7})}));
  EXPECT_EQ(Depth(index_), 3u);
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 3u, 3u, 7u));
  index_.ApplyEvent(1, Remove({a_}));
  index_.ApplyEvent(1, Remove({22}));
  EXPECT_EQ(Depth(index_), 3u);  // block 0 via B and C, block 1 via A's and C's children
  index_.ApplyEvent(1, Remove({kB}));
  EXPECT_EQ(Depth(index_), 3u);
  // A child of B (removed) is an unknown-parent run; a child of A's child still chains.
  index_.ApplyBatch(1, Batch({Store({24}, kB, {6}), Store({42}, a1_, {7})}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  index_.ApplyBatch(1, Batch({Store({kD}, std::nullopt, {5}), Store({25}, kD, {6})}));
  // Block 0 via C and D only: both go, block 0 becomes a hole under its held children.
  index_.ApplyEvent(1, Remove({kC}));
  EXPECT_EQ(Depth(index_), 3u);
  index_.ApplyEvent(1, Remove({kD}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_)).count(1), 0u);
  EXPECT_EQ(index_.stats().nodes, 3u);
  // A new hash E for block 0 restores the whole chain under it.
  index_.ApplyEvent(1, Store({kE}, std::nullopt, {5}));
  EXPECT_EQ(Depth(index_), 3u);
  // Block 1 is held through a1, 23 and 25; block 2 through 41 and 42.
  index_.ApplyEvent(1, Remove({a1_, 23, 41}));
  EXPECT_EQ(Depth(index_), 3u);
  index_.ApplyEvent(1, Remove({25}));
  EXPECT_EQ(Depth(index_), 1u);  // block 1 a hole under block 2
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
  ExpectRestoredCopyAgrees({keys_, {keys_[0]}, {keys_[0], keys_[1]}});
  // A clear in the middle: the worker's lookups are empty, the others' unaffected.
  index_.ApplyEvent(2, Store({a_}, std::nullopt, {5}));
  index_.ApplyEvent(1, AllBlocksCleared{});
  auto m = ByWorker(index_.Lookup(keys_));
  EXPECT_EQ(m.count(1), 0u);
  EXPECT_EQ(m[2].depth[0], 1u);
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, 1u, 1u, 1u));
  // After the clear the worker starts over: an old hash as parent is unknown.
  index_.ApplyEvent(1, Store({26}, kE, {6}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 2u);
}

TEST_P(IndexSaltedHashesTest, SaltedCopiesInTwoTiersAreCountedPerTierAndHash) {
  // A in GPU twice, B in CPU, C in GPU: one block, GPU refs 3, CPU refs 1.
  index_.ApplyBatch(1,
                    Batch({Store({a_}, std::nullopt, {5}), Store({a_}, std::nullopt, {5}),
                           Store({kB}, std::nullopt, {5}, "CPU"), Store({kC}, std::nullopt, {5})}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_))[1], Match(1, 1, 1, 0, 0, 1));
  index_.ApplyEvent(1, Remove({kB}, "DISK"));  // the block is not held in DISK
  EXPECT_EQ(index_.counters().unknown_removals, 1u);
  index_.ApplyEvent(1, Remove({a_, kC}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_))[1], Match(1, 1, 1, 0, 0, 1));
  EXPECT_EQ(index_.stats().engine_hashes, 2u);  // A (one copy left) and B
  index_.ApplyEvent(1, Remove({kB}, "CPU"));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_))[1], Match(1, 1, 0, 0, 0, 1));
  index_.ApplyEvent(1, Remove({a_}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
}

INSTANTIATE_TEST_SUITE_P(EngineMapOrKeyedFirst, IndexSaltedHashesTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "KeyedFirst" : "EngineMap"; });

// A keyed worker (hashes are kvroute's keys) with a deep chain switches to a map midway.
TEST_F(IndexEdgeTest, KeyedWorkerSwitchingToAMapKeepsEveryCountAndParent) {
  std::vector<std::uint32_t> contents(300);
  for (std::uint32_t i = 0; i < contents.size(); ++i) contents[i] = 7 + i;
  const auto keys = PromptKeys(keyer_, contents);
  // Keyed: 300 blocks, block 150 twice (GPU), blocks 0..9 also in CPU.
  index_.ApplyEvent(1, Store({keys.begin(), keys.end()}, std::nullopt, contents));
  index_.ApplyEvent(1, Store({keys[150]}, keys[149], {contents[150]}));
  index_.ApplyEvent(
      1, Store({keys.begin(), keys.begin() + 10}, std::nullopt, Slice(contents, 0, 10), "CPU"));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 300u, 300u, 300u));
  // The switch: a salted hash of block 200 continuing from keyed block 199.
  index_.ApplyEvent(1, Store({777}, keys[199], {contents[200]}));
  EXPECT_EQ(index_.stats().engine_hashes, 301u);
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 300, 10, 0, 0, 300));
  // Keyed hashes still resolve, with their counts, as removals and as parents.
  index_.ApplyEvent(1, Remove({keys[150]}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1].depth[0], 300u);
  index_.ApplyEvent(1, Remove({keys[150], keys[200]}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1].depth[0], 150u);
  index_.ApplyEvent(1, Store({keys[150]}, keys[149], {contents[150]}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1].depth[0], 300u);  // 200 still held via 777
  index_.ApplyEvent(1, Remove({777}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 200, 10, 0, 0, 200));
  index_.ApplyEvent(1, Remove({keys[5]}, "CPU"));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 200, 5, 0, 0, 200));
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
  ExpectRestoredCopyAgrees({keys, {keys.begin(), keys.begin() + 201}});
  // A clear in the middle, then keyed again without a map.
  index_.ApplyEvent(1, AllBlocksCleared{});
  EXPECT_TRUE(ByWorker(index_.Lookup(keys)).empty());
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
  index_.ApplyEvent(1,
                    Store({keys.begin(), keys.begin() + 3}, std::nullopt, Slice(contents, 0, 3)));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 3, 0, 0, 0, 3));
  EXPECT_EQ(index_.stats().engine_hashes, 3u);
}

}  // namespace
}  // namespace kvroute::kv
