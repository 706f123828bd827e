// Black-box edge cases of KvIndex past 16 bits of depth and fan-out: chains deeper than
// 65,535 blocks (prefixes, divergences and holes around the boundary), a block with more than
// 65,535 children counted down through the boundary and back, a parent nobody holds kept only
// by its children's count, and AllBlocksCleared in the middle of each. Only the public API is
// used, so these tests hold whatever the internal layout; expectations are computed by hand
// from what each test stored. Shared helpers: kv/index/index_edge_test_util.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "kv/index/index.h"
#include "kv/index/index_edge_test_util.h"
#include "kv/index/index_test_util.h"

namespace kvroute::kv {
namespace {

using testing::Batch;
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
    EXPECT_EQ(m[1], Match(1, n, n, n, n, n)) << n;
    const std::uint32_t w2 = std::min(n, kW2);
    EXPECT_EQ(m[2], Match(2, 0, w2, w2, w2, w2)) << n;
  }
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, kDeep, kDeep + kW2, kDeep + kW2));
}

TEST_F(IndexDeepChainTest, PromptsDivergingPastTheSixteenBitBoundaryStopThere) {
  for (std::uint32_t at : {65'533u, 65'534u, 65'535u, 65'536u, 65'537u, 69'999u}) {
    auto m = Look(DivergingAt(at));
    EXPECT_EQ(m[1], Match(1, at, at, at, at, at)) << at;
    const std::uint32_t w2 = std::min(at, kW2);
    EXPECT_EQ(m[2], Match(2, 0, w2, w2, w2, w2)) << at;
  }
}

TEST_F(IndexDeepChainTest, HolesPastTheSixteenBitBoundaryStopTheMatch) {
  // The tail, then holes in the middle (blocks after them stay held).
  index_.ApplyEvent(1, Remove({H(1, kDeep - 1)}));
  EXPECT_EQ(Look(keys_)[1], Match(1, kDeep - 1, kDeep - 1, kDeep - 1, kDeep - 1, kDeep - 1));
  index_.ApplyEvent(1, Remove({H(1, 67'000)}));
  EXPECT_EQ(Look(keys_)[1], Match(1, 67'000, 67'000, 67'000, 67'000, 67'000));
  index_.ApplyEvent(1, Remove({H(1, 65'536)}));
  auto m = Look(keys_);
  EXPECT_EQ(m[1], Match(1, 65'536, 65'536, 65'536, 65'536, 65'536));
  EXPECT_EQ(m[2], Match(2, 0, kW2, kW2, kW2, kW2));
  for (std::uint32_t n : {65'535u, 65'536u, 65'537u, 67'000u, 67'001u, 67'002u}) {
    EXPECT_EQ(Look(Prefix(n))[1].depth[0], std::min(n, 65'536u)) << n;
  }
  // The tail node goes (nobody holds it, no children); the two holes stay as nodes.
  EXPECT_EQ(StatsTuple(index_.stats()),
            std::tuple(2u, kDeep - 1, kDeep - 3 + kW2, kDeep - 3 + kW2));

  // Worker 2 gets a hole exactly at depth 65,535 under its last block.
  index_.ApplyEvent(2, Remove({H(2, 65'535)}, "CPU"));
  EXPECT_EQ(Look(keys_)[2], Match(2, 0, 65'535, 65'535, 65'535, 65'535));

  // Filling worker 1's first hole moves it to the next one.
  index_.ApplyEvent(1, Store({H(1, 65'536)}, H(1, 65'535), {contents_[65'536]}));
  EXPECT_EQ(Look(keys_)[1], Match(1, 67'000, 67'000, 67'000, 67'000, 67'000));

  // A branch off depth 66,000: its block is at depth 66,001.
  index_.ApplyEvent(1, Store({H(1, 900'000)}, H(1, 66'000), {999'999}));
  auto branch = Prefix(66'001);
  branch.push_back(Child(keys_[66'000], 999'999));
  m = Look(branch);
  EXPECT_EQ(m[1], Match(1, 66'002, 66'002, 66'002, 66'002, 66'002));
  EXPECT_EQ(m[2], Match(2, 0, 65'535, 65'535, 65'535, 65'535));

  ExpectRestoredCopyAgrees({keys_, branch, Prefix(65'536), Prefix(67'001), DivergingAt(65'535)});
}

TEST_F(IndexDeepChainTest, AllBlocksClearedOfTheDeepWorkerLeavesTheOtherExact) {
  index_.ApplyEvent(2, Remove({H(2, 65'535)}, "CPU"));
  index_.ApplyBatch(1, Batch({AllBlocksCleared{}}));
  auto m = Look(keys_);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[2], Match(2, 0, 65'535, 65'535, 65'535, 65'535));
  // Worker 2 keeps 0..65,536 but 65,535 (a hole node).
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(2u, kW2, kW2 - 1, kW2 - 1));
  // Worker 1 stores the chain again past the boundary; its old hashes were forgotten.
  index_.ApplyEvent(1, Store({H(1, 65'537)}, H(1, 65'536), {contents_[65'537]}));
  EXPECT_EQ(index_.counters().unknown_parent_runs, 1u);
  index_.ApplyEvent(1, Store(Hashes(1, 0, 65'540), std::nullopt, Slice(contents_, 0, 65'540)));
  EXPECT_EQ(Look(keys_)[1], Match(1, 65'540, 65'540, 65'540, 65'540, 65'540));
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
    EXPECT_EQ(m[1], Match(1, d1, d1, d1, d1, d1)) << i;
    EXPECT_EQ(m[2], Match(2, d2, d2, d2, d2, d2)) << i;
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
    EXPECT_EQ(Look(KidPrompt(i))[1], Match(1, 2, 2, 2, 2, 2)) << i;
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
  EXPECT_EQ(Look(KidPrompt(20'000))[1], Match(1, 2, 2, 2, 2, 2));
  EXPECT_EQ(Look(KidPrompt(kFirstChecked))[1], Match(1, 1, 1, 1, 1, 1));
  EXPECT_EQ(Look(KidPrompt(50'000)).count(2), 0u);
  index_.ApplyEvent(2, Store({H(2, 0)}, std::nullopt, {0}));
  EXPECT_EQ(Look(KidPrompt(50'000))[2], Match(2, 2, 2, 2, 2, 2));
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
  EXPECT_EQ(Look(prompt(10))[1], Match(1, 3, 3, 3, 3, 3));
  EXPECT_EQ(Look(prompt(65'539))[1], Match(1, 1, 1, 1, 1, 1));
  EXPECT_EQ(Look(prompt(5))[1], Match(1, 1, 1, 1, 1, 1));
  ExpectRestoredCopyAgrees({prompt(0), prompt(10), prompt(65'539)});
  index_.ApplyEvent(1, AllBlocksCleared{});
  EXPECT_EQ(StatsTuple(index_.stats()), std::tuple(1u, 0u, 0u, 0u));
}

TEST_F(IndexWideFanOutTest, RemovingEverythingEmptiesTheIndex) {
  // The parent first (a hole under 40,000 held children), then the children, then worker 2.
  index_.ApplyEvent(1, Remove({H(1, 0)}));
  auto m = Look(KidPrompt(10));
  EXPECT_EQ(m.count(1), 0u);  // worker 1 no longer holds block 0
  EXPECT_EQ(m[2], Match(2, 1, 1, 1, 1, 1));
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

}  // namespace
}  // namespace kvroute::kv
