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

// Ends a write with every holder list settled. The 24-byte layout keeps the entries a write
// touched in a spilled (heap) form and packs them back inline only after ~1,024 of them, or
// in RemoveWorker and Restore; removing a worker that never held anything forces the packing,
// so the next steps read the packed form. Nothing observable changes.
void Settle(KvIndex& index) {
  constexpr WorkerId kNobody = 0xFFFF'FFF0u;
  index.MarkStale(kNobody);
  index.RemoveWorker(kNobody);
}
void ApplySettled(KvIndex& index, WorkerId w, const KvEvent& e) {
  index.ApplyEvent(w, e);
  Settle(index);
}
void ApplySettled(KvIndex& index, WorkerId w, const KvEventBatch& b) {
  index.ApplyBatch(w, b);
  Settle(index);
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

TEST_F(IndexWideFanOutTest, AParentNobodyHoldsStaysWhileItsChildCountCrossesTheBoundary) {
  // Block 0 becomes a hole in both workers: it stays a node only because of its children.
  index_.ApplyBatch(1, Batch({Remove({H(1, 0)})}));
  index_.ApplyBatch(2, Batch({Remove({H(2, 0)})}));
  EXPECT_EQ(index_.stats().nodes, 1u + kKids);
  constexpr std::uint32_t kFirstChecked = kKids - 65'538;
  RemoveKids(1, 0, kFirstChecked);
  // 65,537 .. 65,533 children, each removal deleting one child node under the parent.
  for (std::uint32_t i = kFirstChecked; i < kFirstChecked + 5; ++i) {
    RemoveKids(1, i, i + 1);
    EXPECT_EQ(index_.stats().nodes, 1u + kKids - i - 1) << i;
  }
  // Block 0 back in worker 1: its remaining children are reachable under it again.
  index_.ApplyEvent(1, Store({H(1, 0)}, std::nullopt, {0}));
  EXPECT_EQ(Look(KidPrompt(20'000))[1], Match(1, 2, 0, 0, 0, 2));
  EXPECT_EQ(Look(KidPrompt(kFirstChecked))[1], Match(1, 1, 0, 0, 0, 1));
  EXPECT_EQ(Look(KidPrompt(50'000)).count(2), 0u);
  index_.ApplyEvent(2, Store({H(2, 0)}, std::nullopt, {0}));
  EXPECT_EQ(Look(KidPrompt(50'000))[2], Match(2, 2, 0, 0, 0, 2));
  EXPECT_EQ(index_.stats().nodes, 1u + kKids - kFirstChecked - 5);
  ExpectRestoredCopyAgrees({KidPrompt(0), KidPrompt(20'000), KidPrompt(50'000)});
}

// A node's child count matters alone when no worker has an entry in it: all its children are
// holes (not held, with held children of their own). Here 65,540 of them, counted down
// through 65,536 by deleting one child node at a time.
TEST_F(IndexEdgeTest, ABlockWhoseChildrenAreAllHolesStaysWhileTheirCountCrossesTheBoundary) {
  constexpr std::uint32_t kKids = 65'540;
  const BlockKey root = PromptKeys(keyer_, {0})[0];
  auto prompt = [&](std::uint32_t i) {
    const BlockKey c = Child(root, 1 + i);
    return std::vector<BlockKey>{root, c, Child(c, 1'000'000 + i)};
  };
  // Child i: hash H(1, 1 + 2i), content 1 + i; its child: H(1, 2 + 2i), content 1,000,000 + i.
  index_.ApplyEvent(1, Store({H(1, 0)}, std::nullopt, {0}));
  for (std::uint32_t b = 0; b < kKids; b += 1000) {
    std::vector<KvEvent> events;
    for (std::uint32_t i = b; i < std::min(kKids, b + 1000); ++i) {
      events.push_back(Store({H(1, 1 + 2 * i), H(1, 2 + 2 * i)}, H(1, 0), {1 + i, 1'000'000 + i}));
    }
    index_.ApplyBatch(1, Batch(std::move(events)));
  }
  std::vector<EngineHash> holes{H(1, 0)};
  for (std::uint32_t i = 0; i < kKids; ++i) holes.push_back(H(1, 1 + 2 * i));
  index_.ApplyEvent(1, Remove(std::move(holes)));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 1 + 2 * kKids, kKids, kKids));
  EXPECT_TRUE(Look(prompt(0)).empty());
  index_.ApplyEvent(1, Remove({H(1, 2), H(1, 4), H(1, 6)}));  // 65,537 children left
  for (std::uint32_t i = 3; i < 8; ++i) {
    index_.ApplyEvent(1, Remove({H(1, 2 + 2 * i)}));
    const std::uint32_t kids = kKids - i - 1;  // 65,536 .. 65,532
    EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 1 + 2 * kids, kids, kids)) << kids;
  }
  // Block 0 and one child back: that chain is whole again, the others still stop at the hole.
  index_.ApplyBatch(1,
                    Batch({Store({H(1, 0)}, std::nullopt, {0}), Store({H(1, 21)}, H(1, 0), {11})}));
  EXPECT_EQ(Look(prompt(10))[1], Match(1, 3, 0, 0, 0, 3));
  EXPECT_EQ(Look(prompt(65'539))[1], Match(1, 1, 0, 0, 0, 1));
  EXPECT_EQ(Look(prompt(5))[1], Match(1, 1, 0, 0, 0, 1));
  ExpectRestoredCopyAgrees({prompt(0), prompt(10), prompt(65'539)});
  index_.ApplyEvent(1, AllBlocksCleared{});
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
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
    std::vector<std::map<WorkerId, WorkerMatch>> want(kGroups);
    for (const auto& [id, e] : expect) {
      WorkerMatch m = Match(id, 0, 0, 0, 0, e.len, e.stale);
      m.depth[e.tier] = e.len;
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
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 2, 1, 0, 0, 2));
  for (int r = 1; r <= 255; ++r) {
    ApplySettled(index_, 1, Remove({H(1, 0)}));
    const auto m = ByWorker(index_.Lookup(keys));
    ASSERT_EQ(m.at(1).depth[0], r < 255 ? 2u : 0u) << r;
  }
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 0, 1, 0, 0, 2));
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
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 2, 1, 0, 0, 2));
  ApplySettled(index_, 1, AllBlocksCleared{});
  auto m = ByWorker(index_.Lookup(keys));
  EXPECT_EQ(m.count(1), 0u);
  EXPECT_EQ(m[2], Match(2, 1, 0, 0, 0, 1));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, 1u, 1u, 1u));
  // Counts start over: the old hashes are unknown, one store is undone by one removal.
  ApplySettled(index_, 1, Remove({H(1, 0), H(1, 1)}));
  EXPECT_EQ(index_.counters().unknown_removals, 2u);
  ApplySettled(index_, 1, Store({H(1, 0)}, std::nullopt, {5}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 1, 0, 0, 0, 1));
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
    EXPECT_EQ(ByWorker(index.Lookup(keys))[1], Match(1, 2, 1, 0, 0, 2));
    for (std::uint32_t r = 1; r <= gpu; ++r) {
      ApplySettled(index, 1, Remove({H(1, 0)}));
      const std::uint32_t g = r < gpu ? 2 : 0;
      EXPECT_EQ(ByWorker(index.Lookup(keys))[1], Match(1, g, 1, 0, 0, 2)) << gpu << " " << r;
    }
    for (std::uint32_t r = 1; r <= cpu; ++r) {
      ApplySettled(index, 1, Remove({H(1, 0)}, "CPU"));
      const auto m = ByWorker(index.Lookup(keys));
      if (r < cpu) {
        EXPECT_EQ(m.at(1), Match(1, 0, 1, 0, 0, 2)) << gpu << " " << r;
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
      for (int t = 0; t < kNumTiers; ++t) {
        want.depth[t] = i < count[t] ? kP + 2 : kP + 1;
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
    for (EngineHash h : {a_, kB, kC}) ApplySettled(index, 1, Store({h}, std::nullopt, {5}));
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 1u, 1u, 3u));
    ApplySettled(index, 1, Remove({a_}));  // the first hash goes, the block stays
    EXPECT_EQ(Depth(index), 1u);
    EXPECT_EQ(index.stats().engine_hashes, 2u);
    ApplySettled(index, 1, Remove({a_}));
    EXPECT_EQ(index.counters().unknown_removals, 1u);
    ApplySettled(index, 1, Store({kD}, std::nullopt, {5}));
    EXPECT_EQ(index.stats().engine_hashes, 3u);
    for (std::size_t k = 0; k < order.size(); ++k) {
      ApplySettled(index, 1, Remove({order[k]}));
      EXPECT_EQ(Depth(index), k + 1 < order.size() ? 1u : 0u) << k;
      EXPECT_EQ(index.stats().engine_hashes, order.size() - k - 1) << k;
    }
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 0u, 0u, 0u));
    // Removed hashes are unknown, as removals and as parents; a new hash stores it again.
    ApplySettled(index, 1, Remove({order[0], 99}));
    EXPECT_EQ(index.counters().unknown_removals, 3u);
    ApplySettled(index, 1, Store({31}, kB, {6}));
    EXPECT_EQ(index.counters().unknown_parent_runs, 1u);
    ApplySettled(index, 1, Store({kE}, std::nullopt, {5}));
    ApplySettled(index, 1, Store({32}, kE, {6}));
    EXPECT_EQ(Depth(index), 2u);
    EXPECT_EQ(StatsTuple(index.stats()), std::tuple(1u, 2u, 2u, 2u));
    EXPECT_EQ(index.counters().hash_conflicts, 0u);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST_P(IndexSaltedHashesTest, ChainsContinuingFromEachHashShareOneCanonicalChain) {
  for (EngineHash h : {a_, kB, kC}) ApplySettled(index_, 1, Store({h}, std::nullopt, {5}));
  // A child under each hash (one canonical child), a grandchild under B's child.
  ApplySettled(index_, 1,
               Batch({Store({a1_}, a_, {6}), Store({22}, kB, {6}), Store({23}, kC, {6}),
                      Store({41}, 22, {7})}));
  EXPECT_EQ(Depth(index_), 3u);
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 3u, 3u, 7u));
  ApplySettled(index_, 1, Remove({a_}));
  ApplySettled(index_, 1, Remove({22}));
  EXPECT_EQ(Depth(index_), 3u);  // block 0 via B and C, block 1 via A's and C's children
  ApplySettled(index_, 1, Remove({kB}));
  EXPECT_EQ(Depth(index_), 3u);
  // A child of B (removed) is an unknown-parent run; a child of A's child still chains.
  ApplySettled(index_, 1, Batch({Store({24}, kB, {6}), Store({42}, a1_, {7})}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  ApplySettled(index_, 1, Batch({Store({kD}, std::nullopt, {5}), Store({25}, kD, {6})}));
  // Block 0 via C and D only: both go, block 0 becomes a hole under its held children.
  ApplySettled(index_, 1, Remove({kC}));
  EXPECT_EQ(Depth(index_), 3u);
  ApplySettled(index_, 1, Remove({kD}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_)).count(1), 0u);
  EXPECT_EQ(index_.stats().nodes, 3u);
  // A new hash E for block 0 restores the whole chain under it.
  ApplySettled(index_, 1, Store({kE}, std::nullopt, {5}));
  EXPECT_EQ(Depth(index_), 3u);
  // Block 1 is held through a1, 23 and 25; block 2 through 41 and 42.
  ApplySettled(index_, 1, Remove({a1_, 23, 41}));
  EXPECT_EQ(Depth(index_), 3u);
  ApplySettled(index_, 1, Remove({25}));
  EXPECT_EQ(Depth(index_), 1u);  // block 1 a hole under block 2
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
  ExpectRestoredCopyAgrees({keys_, {keys_[0]}, {keys_[0], keys_[1]}});
  // A clear in the middle: the worker's lookups are empty, the others' unaffected.
  ApplySettled(index_, 2, Store({a_}, std::nullopt, {5}));
  ApplySettled(index_, 1, AllBlocksCleared{});
  auto m = ByWorker(index_.Lookup(keys_));
  EXPECT_EQ(m.count(1), 0u);
  EXPECT_EQ(m[2].depth[0], 1u);
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, 1u, 1u, 1u));
  // After the clear the worker starts over: an old hash as parent is unknown.
  ApplySettled(index_, 1, Store({26}, kE, {6}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 2u);
}

TEST_P(IndexSaltedHashesTest, SaltedCopiesInTwoTiersAreCountedPerTierAndHash) {
  // A in GPU twice, B in CPU, C in GPU: one block, GPU refs 3, CPU refs 1.
  ApplySettled(index_, 1,
               Batch({Store({a_}, std::nullopt, {5}), Store({a_}, std::nullopt, {5}),
                      Store({kB}, std::nullopt, {5}, "CPU"), Store({kC}, std::nullopt, {5})}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_))[1], Match(1, 1, 1, 0, 0, 1));
  ApplySettled(index_, 1, Remove({kB}, "DISK"));  // the block is not held in DISK
  EXPECT_EQ(index_.counters().unknown_removals, 1u);
  ApplySettled(index_, 1, Remove({a_, kC}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_))[1], Match(1, 1, 1, 0, 0, 1));
  EXPECT_EQ(index_.stats().engine_hashes, 2u);  // A (one copy left) and B
  ApplySettled(index_, 1, Remove({kB}, "CPU"));
  EXPECT_EQ(ByWorker(index_.Lookup(keys_))[1], Match(1, 1, 0, 0, 0, 1));
  ApplySettled(index_, 1, Remove({a_}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
}

// Engine hashes equal in their low or their high 32 bits (an engine map may keep only half
// of a hash in its table) name different blocks, or one block, and stay told apart.
TEST_F(IndexEdgeTest, EngineHashesSharingHalfTheirBitsStayDistinct) {
  constexpr EngineHash kLo = 0x0000'0005, kHi = 0x0000'0001'0000'0000ULL;
  const EngineHash x = kHi | kLo, y = 2 * kHi | kLo, z = kHi | 6, x2 = 3 * kHi | kLo;
  // x: block {5}; y: block {5, 6} under x; z: block {7}; x2: block {5} again (salted).
  ApplySettled(index_, 1,
               Batch({Store({x}, std::nullopt, {5}), Store({y}, x, {6}),
                      Store({z}, std::nullopt, {7}), Store({x2}, std::nullopt, {5})}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 3u, 3u, 4u));
  EXPECT_EQ(Look(std::vector<std::uint32_t>{5, 6})[1], Match(1, 2, 0, 0, 0, 2));
  // Hashes sharing a half with held ones but never stored are unknown.
  ApplySettled(index_, 1, Remove({4 * kHi | kLo, kHi | 9, kLo, kHi}));
  EXPECT_EQ(index_.counters().unknown_removals, 4u);
  ApplySettled(index_, 1, Store({11}, kHi | 8, {6}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  ApplySettled(index_, 1, Remove({x}));
  EXPECT_EQ(Look(std::vector<std::uint32_t>{5, 6})[1], Match(1, 2, 0, 0, 0, 2));  // via x2
  ApplySettled(index_, 1, Remove({x2, z}));
  EXPECT_EQ(Look(std::vector<std::uint32_t>{5, 6}).count(1), 0u);
  EXPECT_TRUE(Look(std::vector<std::uint32_t>{7}).empty());
  ApplySettled(index_, 1, Remove({y}));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
  EXPECT_EQ(index_.counters().unknown_removals, 4u);
}

INSTANTIATE_TEST_SUITE_P(EngineMapOrKeyedFirst, IndexSaltedHashesTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "KeyedFirst" : "EngineMap"; });

// A keyed worker (hashes are kvroute's keys) with a deep chain switches to a map midway.
TEST_F(IndexEdgeTest, KeyedWorkerSwitchingToAMapKeepsEveryCountAndParent) {
  std::vector<std::uint32_t> contents(300);
  for (std::uint32_t i = 0; i < contents.size(); ++i) contents[i] = 7 + i;
  const auto keys = PromptKeys(keyer_, contents);
  // Keyed: 300 blocks, block 150 twice (GPU), blocks 0..9 also in CPU.
  ApplySettled(index_, 1, Store({keys.begin(), keys.end()}, std::nullopt, contents));
  ApplySettled(index_, 1, Store({keys[150]}, keys[149], {contents[150]}));
  ApplySettled(
      index_, 1,
      Store({keys.begin(), keys.begin() + 10}, std::nullopt, Slice(contents, 0, 10), "CPU"));
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 300u, 300u, 300u));
  // The switch: a salted hash of block 200 continuing from keyed block 199.
  ApplySettled(index_, 1, Store({777}, keys[199], {contents[200]}));
  EXPECT_EQ(index_.stats().engine_hashes, 301u);
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 300, 10, 0, 0, 300));
  // Keyed hashes still resolve, with their counts, as removals and as parents.
  ApplySettled(index_, 1, Remove({keys[150]}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1].depth[0], 300u);
  ApplySettled(index_, 1, Remove({keys[150], keys[200]}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1].depth[0], 150u);
  ApplySettled(index_, 1, Store({keys[150]}, keys[149], {contents[150]}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1].depth[0], 300u);  // 200 still held via 777
  ApplySettled(index_, 1, Remove({777}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 200, 10, 0, 0, 200));
  ApplySettled(index_, 1, Remove({keys[5]}, "CPU"));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 200, 5, 0, 0, 200));
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
  ExpectRestoredCopyAgrees({keys, {keys.begin(), keys.begin() + 201}});
  // A clear in the middle, then keyed again without a map.
  ApplySettled(index_, 1, AllBlocksCleared{});
  EXPECT_TRUE(ByWorker(index_.Lookup(keys)).empty());
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
  ApplySettled(index_, 1,
               Store({keys.begin(), keys.begin() + 3}, std::nullopt, Slice(contents, 0, 3)));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 3, 0, 0, 0, 3));
  EXPECT_EQ(index_.stats().engine_hashes, 3u);
}

// ---------------------------------------------------------------------------------------------
// Randomized: the regimes above mixed in one stream, against a reference model.

// The model, written as plainly as possible (the differential test's, plus the 255-copy
// saturation, the counters, and every key's parent so that nodes can be counted: a node
// exists iff some worker holds it or one of its descendants).
class ReferenceIndex {
 public:
  explicit ReferenceIndex(const BlockKeyer& keyer) : keyer_(keyer) {}

  void Apply(WorkerId w, const KvEvent& event) {
    Worker& wk = workers_[w];
    if (std::holds_alternative<AllBlocksCleared>(event)) {
      wk = Worker{};
      return;
    }
    if (const auto* r = std::get_if<BlockRemoved>(&event)) {
      const int t = static_cast<int>(*TierFromMedium(r->medium.value_or("GPU")));
      for (EngineHash h : r->block_hashes) {
        auto it = wk.engine.find(h);
        auto held = it == wk.engine.end() ? wk.held.end() : wk.held.find(it->second.key);
        if (held == wk.held.end() || held->second[t] == 0) {
          ++counters.unknown_removals;
          continue;
        }
        --held->second[t];
        if (held->second == std::array<int, kNumTiers>{}) wk.held.erase(held);
        if (--it->second.refs == 0) wk.engine.erase(it);
      }
      return;
    }
    const auto& s = std::get<BlockStored>(event);
    const int t = static_cast<int>(*TierFromMedium(s.medium.value_or("GPU")));
    std::optional<BlockKey> parent;
    if (s.parent_block_hash) {
      auto it = wk.engine.find(*s.parent_block_hash);
      if (it == wk.engine.end()) {
        ++counters.unknown_parent_runs;
        return;
      }
      parent = it->second.key;
    }
    for (std::size_t i = 0; i < s.block_hashes.size(); ++i) {
      std::span<const TokenId> tokens(s.token_ids.data() + i * s.block_size, s.block_size);
      const BlockKey key =
          keyer_.Next(parent.value_or(keyer_.Root(s.lora_name.value_or(""))), tokens);
      auto [it, inserted] = wk.engine.try_emplace(s.block_hashes[i], Mapping{key, 0});
      if (!inserted && it->second.key != key) {
        ++counters.hash_conflicts;
        return;
      }
      int& copies = wk.held[key][t];
      if (copies == 255) {
        ++counters.ref_overflow;
        if (inserted) wk.engine.erase(it);
      } else {
        ++copies;
        ++it->second.refs;
      }
      parent_of_[key] = parent;
      parent = key;
    }
  }
  void RemoveWorker(WorkerId w) { workers_.erase(w); }
  void MarkStale(WorkerId w) { workers_[w].stale = true; }
  void ClearStale(WorkerId w) {
    if (auto it = workers_.find(w); it != workers_.end()) it->second.stale = false;
  }

  std::map<WorkerId, WorkerMatch> Lookup(const std::vector<BlockKey>& keys) const {
    std::map<WorkerId, WorkerMatch> out;
    for (const auto& [w, wk] : workers_) {
      WorkerMatch m;
      m.worker = w;
      m.stale = wk.stale;
      std::array<bool, kNumTiers> alive{true, true, true, true};
      bool any_alive = true;
      for (BlockKey key : keys) {
        auto it = wk.held.find(key);
        if (it == wk.held.end()) break;
        for (int t = 0; t < kNumTiers; ++t) {
          alive[t] = alive[t] && it->second[t] > 0;
          m.depth[t] += alive[t];
        }
        m.any_depth += any_alive;
      }
      if (m.any_depth > 0) out[w] = m;
    }
    return out;
  }

  // Counting nodes walks every held key up its chain: `nodes` false leaves it 0 (cheaper).
  IndexStats Stats(bool nodes = true) const {
    IndexStats s;
    s.workers = workers_.size();
    std::unordered_set<BlockKey> seen;
    for (const auto& [w, wk] : workers_) {
      s.entries += wk.held.size();
      s.engine_hashes += wk.engine.size();
      if (!nodes) continue;
      for (const auto& [key, copies] : wk.held) {
        std::optional<BlockKey> k = key;
        while (k && seen.insert(*k).second) k = parent_of_.at(*k);
      }
    }
    s.nodes = seen.size();
    return s;
  }

  IndexCounters counters;  // only the four the model keeps

 private:
  struct Mapping {
    BlockKey key;
    int refs;
  };
  struct Worker {
    std::map<EngineHash, Mapping> engine;
    std::unordered_map<BlockKey, std::array<int, kNumTiers>> held;  // copies per tier
    bool stale = false;
  };
  const BlockKeyer& keyer_;
  std::map<WorkerId, Worker> workers_;
  std::unordered_map<BlockKey, std::optional<BlockKey>> parent_of_;
};

// Engine hashes crafted so that their mixes (kv/index_flat_map.h MixKey) share the top half
// (the engine map's fingerprint in the 24-byte layout) or the bottom half (what a worker's
// entry keeps), including the halves 0 and 0xFFFFFFFF (the empty-slot marker's): 12 hashes,
// each naming one block of a 6-block chain per worker, two per block (salted duplicates).
// Random stores, removals, clears and worker removals on 3 workers, checked after every step
// against the model. Expectations do not depend on the mix: with another one these are just
// 12 hashes.
TEST(IndexEdgeCraftedHashesTest, HashesSharingAFingerprintOrABottomHalfAgreeWithTheModel) {
  std::vector<EngineHash> pool;
  for (std::uint64_t top : {0x0ULL, 0xFFFF'FFFFULL, 0x1234'5678ULL}) {
    for (std::uint64_t lo : {0x0ULL, 0x1ULL, 0xFFFF'FFFFULL, 0xFFFF'FFFEULL}) {
      pool.push_back(UnmixKey(top << 32 | lo));
    }
  }
  BlockKeyer keyer;
  const auto keys = PromptKeys(keyer, {1, 2, 3, 4, 5, 6});
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    auto uniform = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    KvIndex index(keyer);
    ReferenceIndex ref(keyer);
    // Hash i names block (i + w) % 6 of worker w's chain.
    auto block_of = [](int i, WorkerId w) { return static_cast<std::uint32_t>((i + w) % 6); };
    auto apply = [&](WorkerId w, const KvEvent& e) {
      ref.Apply(w, e);
      index.ApplyEvent(w, e);
      if (uniform(2) == 0) Settle(index);  // both the spilled and the packed form
    };
    for (int step = 0; step < 2000; ++step) {
      const WorkerId w = static_cast<WorkerId>(1 + uniform(3));
      const int op = uniform(100);
      const std::string medium = uniform(5) == 0 ? "CPU" : "GPU";
      if (op < 65) {
        const int i = uniform(12);
        const std::uint32_t b = block_of(i, w);
        std::optional<EngineHash> parent;
        if (b > 0) {
          // The two pool hashes naming block b - 1 for this worker.
          const int j = static_cast<int>((b - 1 + 6 - w % 6) % 6) + 6 * uniform(2);
          parent = pool[j];
        }
        apply(w, Store({pool[i]}, parent, {b + 1}, medium));
      } else if (op < 96) {
        std::vector<EngineHash> hashes{pool[uniform(12)]};
        if (uniform(2) == 0) hashes.push_back(pool[uniform(12)]);
        apply(w, Remove(std::move(hashes), medium));
      } else if (op < 98) {
        apply(w, AllBlocksCleared{});
      } else {
        ref.RemoveWorker(w);
        index.RemoveWorker(w);
      }
      for (std::size_t n : {keys.size(), std::size_t{3}}) {
        const std::vector<BlockKey> prompt(keys.begin(), keys.begin() + n);
        ASSERT_EQ(ByWorker(index.Lookup(prompt)), ref.Lookup(prompt)) << "step=" << step;
      }
      const IndexCounters got = index.counters();
      ASSERT_EQ(StatsTuple(index.stats()), StatsTuple(ref.Stats())) << "step=" << step;
      ASSERT_EQ(std::tuple(got.unknown_removals, got.unknown_parent_runs, got.hash_conflicts),
                std::tuple(ref.counters.unknown_removals, ref.counters.unknown_parent_runs,
                           ref.counters.hash_conflicts))
          << "step=" << step;
      if (step % 250 == 249) {
        KvIndex copy(keyer);
        const std::string image = index.Dump();
        ASSERT_TRUE(copy.Restore(image).has_value()) << "step=" << step;
        ASSERT_EQ(copy.Dump(), image) << "step=" << step;
        ASSERT_EQ(ByWorker(copy.Lookup(keys)), ref.Lookup(keys)) << "step=" << step;
      }
    }
  }
}

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
  auto keyed = [](WorkerId w, int salt) { return w == 6 || (w == 5 && salt == 0); };

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
    if (keyed(w, 0)) return r ? fan_key(*r) : fan_root;
    return H(w, 2'000'000 + (r ? *r + 1 : 0));
  };

  // Short prompts over a 3-letter alphabet, with a salt that changes engine hashes only.
  struct Prompt {
    std::vector<std::uint32_t> contents;
    std::string lora;
    int salt = 0;
  };
  auto random_prompt = [&] {
    Prompt p;
    const int len = 1 + uniform(8);
    for (int i = 0; i < len; ++i) p.contents.push_back(1 + uniform(3));
    p.lora = uniform(6) == 0 ? "adapter-a" : "";
    p.salt = uniform(3) == 0 ? 1 + uniform(3) : 0;
    return p;
  };
  auto prompt_hash = [&](WorkerId w, const Prompt& p, std::size_t i) {
    if (keyed(w, p.salt)) return PromptKeys(keyer, Slice(p.contents, 0, i + 1), p.lora)[i];
    std::uint64_t h = 0x1234567 + (w % 2 == 0 ? w * 0x9E3779B97F4A7C15ULL : 0);
    h ^= std::hash<std::string>{}(p.lora) + static_cast<std::uint64_t>(p.salt) * 0x51ED27;
    for (std::size_t k = 0; k <= i; ++k) h = (h ^ p.contents[k]) * 0x100000001B3ULL + k;
    return h;
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
      for (int i = from; i < to; ++i) s.block_hashes.push_back(prompt_hash(w, p, i));
      if (from > 0) s.parent_block_hash = prompt_hash(w, p, from - 1);
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
