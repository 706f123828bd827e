// Lookup: consecutive prefix depth per worker and tier, stopping at the first missing block.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

#include "kv/index/index.h"
#include "kv/index/index_test_util.h"

namespace kvroute::kv {
namespace {

using testing::Batch;
using testing::ByWorker;
using testing::GpuPrefix;
using testing::Match;
using testing::PromptKeys;
using testing::Remove;
using testing::Store;

std::vector<std::uint32_t> Range(std::uint32_t from, std::uint32_t to) {
  std::vector<std::uint32_t> v(to - from);
  std::iota(v.begin(), v.end(), from);
  return v;
}
std::vector<EngineHash> Hashes(std::uint64_t from, std::uint64_t to) {
  std::vector<EngineHash> v(to - from);
  std::iota(v.begin(), v.end(), from);
  return v;
}

class IndexLookupTest : public ::testing::Test {
 protected:
  BlockKeyer keyer_;
  KvIndex index_{keyer_};
};

TEST_F(IndexLookupTest, EmptyPromptOrEmptyIndexMatchesNothing) {
  EXPECT_TRUE(index_.Lookup({}).empty());
  EXPECT_TRUE(index_.Lookup(PromptKeys(keyer_, {1, 2})).empty());
}

TEST_F(IndexLookupTest, PromptDivergingMidwayMatchesUpToTheDivergence) {
  index_.ApplyBatch(1, Batch({Store({1, 2, 3, 4}, std::nullopt, {1, 2, 3, 4})}));
  EXPECT_EQ(ByWorker(index_.Lookup(PromptKeys(keyer_, {1, 2, 9, 4})))[1].depth[0], 2u);
}

TEST_F(IndexLookupTest, HoleStopsTheMatchAtTheFirstMissingBlock) {
  index_.ApplyBatch(1, Batch({Store(Hashes(100, 140), std::nullopt, Range(0, 40))}));
  index_.ApplyBatch(1, Batch({Remove({117})}));  // block 17 evicted, 18..39 still held
  auto m = ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, 40))));
  EXPECT_EQ(m[1], Match(1, 17, 17, 17, 17, 17));
}

TEST_F(IndexLookupTest, HoleInOneTierIsCoveredByAnotherForAnyTier) {
  index_.ApplyBatch(1, Batch({Store(Hashes(100, 110), std::nullopt, Range(0, 10), "GPU"),
                              Store(Hashes(100, 110), std::nullopt, Range(0, 10), "CPU"),
                              Remove({104}, "GPU"), Remove({107}, "CPU")}));
  auto m = ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, 10))));
  // GPU stops at its hole (4); CPU's hole is on GPU, so CPU-or-faster (and slower tiers)
  // reach the end with any tier.
  EXPECT_EQ(m[1], Match(1, 4, 10, 10, 10, 10));
}

// Issue 20: an engine copies a block to the host when its GPU evicts it, so the host never
// holds the hot prefix the GPU keeps. A tier's depth counts blocks in it or a faster one: the
// host tier's is the GPU prefix plus the host blocks right after it, not 0.
TEST_F(IndexLookupTest, HostBlocksAfterTheGpuPrefixCountForTheHostTier) {
  // Blocks 0..29 computed on GPU; the GPU evicts 10..29 to the host, the host 20..29 to disk.
  index_.ApplyBatch(1, Batch({Store(Hashes(100, 130), std::nullopt, Range(0, 30))}));
  index_.ApplyBatch(1, Batch({Store(Hashes(110, 130), 109, Range(10, 30), "CPU"),
                              Remove(Hashes(110, 130), "GPU")}));
  const auto keys = PromptKeys(keyer_, Range(0, 40));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 10, 30, 30, 30, 30));
  index_.ApplyBatch(1, Batch({Store(Hashes(120, 130), 119, Range(20, 30), "DISK"),
                              Remove(Hashes(120, 130), "CPU")}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 10, 20, 30, 30, 30));
  // The GPU loses block 5 too: GPU stops there, the host's run does not reach block 5.
  index_.ApplyBatch(1, Batch({Remove({105}, "GPU")}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 5, 5, 5, 5, 5));
  // ... until the host gets block 5 back.
  index_.ApplyBatch(1, Batch({Store({105}, 104, {5}, "CPU")}));
  EXPECT_EQ(ByWorker(index_.Lookup(keys))[1], Match(1, 5, 20, 30, 30, 30));
}

// The same split on a long prompt for many workers at once (the search's galloping, barriers
// and per-worker corrections), and for a worker whose host tier has more holes than the
// search lists as barriers (examined position by position).
TEST_F(IndexLookupTest, HostAfterGpuDepthsAreExactForManyWorkersAndManyHoles) {
  constexpr std::uint32_t kBlocks = 600;
  std::map<WorkerId, WorkerMatch> want;
  for (WorkerId w = 1; w <= 80; ++w) {
    const std::uint32_t gpu = (w * 37) % 300 + 1;
    const std::uint32_t cpu_end = std::min(kBlocks, gpu + (w * 53) % 290);
    const EngineHash base = 100'000 * w;
    index_.ApplyBatch(
        w, Batch({Store(Hashes(base, base + cpu_end), std::nullopt, Range(0, cpu_end))}));
    if (cpu_end > gpu) {
      index_.ApplyBatch(w, Batch({Store(Hashes(base + gpu, base + cpu_end), base + gpu - 1,
                                        Range(gpu, cpu_end), "CPU"),
                                  Remove(Hashes(base + gpu, base + cpu_end), "GPU")}));
    }
    want[w] = Match(w, gpu, cpu_end, cpu_end, cpu_end, cpu_end);
  }
  // Worker 99: 300 other prompts' second blocks on the host without their first (holes).
  for (std::uint32_t k = 0; k < 300; ++k) {
    const EngineHash h = 9'000'000 + 2 * k;
    index_.ApplyBatch(99, Batch({Store({h, h + 1}, std::nullopt, {5000 + k, 6000 + k}),
                                 Store({h + 1}, h, {6000 + k}, "CPU"), Remove({h + 1}, "GPU")}));
  }
  index_.ApplyBatch(99, Batch({Store(Hashes(99'000, 99'400), std::nullopt, Range(0, 400)),
                               Store(Hashes(99'100, 99'400), 99'099, Range(100, 400), "CPU"),
                               Remove(Hashes(99'100, 99'400), "GPU")}));
  want[99] = Match(99, 100, 400, 400, 400, 400);
  EXPECT_EQ(ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, kBlocks)))), want);
}

TEST_F(IndexLookupTest, WorkersReportTheirOwnDepths) {
  for (WorkerId w = 1; w <= 50; ++w) {
    index_.ApplyBatch(w, Batch({Store(Hashes(1000, 1000 + 2 * w), std::nullopt, Range(0, 2 * w))}));
  }
  auto m = ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, 64))));
  ASSERT_EQ(m.size(), 50u);
  for (WorkerId w = 1; w <= 50; ++w) {
    const std::uint32_t d = std::min(2 * w, 64u);
    EXPECT_EQ(m[w], Match(w, d, d, d, d, d)) << w;
  }
}

// Drop points far apart, adjacent, and at both ends of a long prompt: the search resolves
// several positions per round (galloping, then an 8-ary search) and must land on each one.
TEST_F(IndexLookupTest, ManyDistinctDepthsOnALongPromptAreEachExact) {
  constexpr std::uint32_t kBlocks = 3000;
  std::vector<std::uint32_t> depths = {1,   2,   3,    9,    10,   17,   64,   65,   127,
                                       128, 129, 1000, 2047, 2048, 2049, 2990, 2999, 3000};
  for (std::uint32_t d = 5; d < kBlocks; d += 37) depths.push_back(d);
  for (WorkerId w = 0; w < depths.size(); ++w) {
    const std::uint64_t base = (w + 1) * 10000;
    index_.ApplyBatch(
        w, Batch({Store(Hashes(base, base + depths[w]), std::nullopt, Range(0, depths[w]))}));
  }
  auto m = ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, kBlocks))));
  ASSERT_EQ(m.size(), depths.size());
  for (WorkerId w = 0; w < depths.size(); ++w) {
    EXPECT_EQ(m[w], GpuPrefix(w, depths[w])) << "depth " << depths[w];
  }
}

TEST_F(IndexLookupTest, HealedHoleMatchesFullDepthAgain) {
  index_.ApplyBatch(1, Batch({Store(Hashes(100, 120), std::nullopt, Range(0, 20)), Remove({105}),
                              Store({105}, 104, {5})}));
  EXPECT_EQ(ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, 20))))[1].depth[0], 20u);
}

TEST_F(IndexLookupTest, HoleOfOneWorkerDoesNotShortenAnother) {
  index_.ApplyBatch(1, Batch({Store(Hashes(100, 120), std::nullopt, Range(0, 20)), Remove({110})}));
  index_.ApplyBatch(2, Batch({Store(Hashes(500, 520), std::nullopt, Range(0, 20))}));
  auto m = ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, 20))));
  EXPECT_EQ(m[1].depth[0], 10u);
  EXPECT_EQ(m[2].depth[0], 20u);
}

TEST_F(IndexLookupTest, BranchesShareTheirCommonPrefix) {
  index_.ApplyBatch(1,
                    Batch({Store({1, 2, 3}, std::nullopt, {1, 2, 3}), Store({14, 15}, 2, {4, 5})}));
  EXPECT_EQ(ByWorker(index_.Lookup(PromptKeys(keyer_, {1, 2, 4, 5})))[1].depth[0], 4u);
  EXPECT_EQ(ByWorker(index_.Lookup(PromptKeys(keyer_, {1, 2, 3, 5})))[1].depth[0], 3u);
}

TEST_F(IndexLookupTest, WorkerNotHoldingBlockZeroIsNotReported) {
  // Worker 1 holds block 1 only in CPU under a GPU parent it then evicted.
  index_.ApplyBatch(1,
                    Batch({Store({1}, std::nullopt, {1}), Store({2}, 1, {2}, "CPU"), Remove({1})}));
  EXPECT_TRUE(index_.Lookup(PromptKeys(keyer_, {1, 2})).empty());
}

TEST_F(IndexLookupTest, WorkerWithManyHolesIsStillExact) {
  // More holes than the lookup lists as barriers: the worker is scanned block by block.
  index_.ApplyBatch(1, Batch({Store(Hashes(100, 1100), std::nullopt, Range(0, 1000))}));
  std::vector<EngineHash> evict;
  for (std::uint64_t i = 900; i > 300; i -= 2) evict.push_back(100 + i);
  index_.ApplyBatch(1, Batch({Remove(evict)}));
  index_.ApplyBatch(2, Batch({Store(Hashes(5000, 5500), std::nullopt, Range(0, 500))}));
  auto m = ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, 1000))));
  EXPECT_EQ(m[1].depth[0], 302u);
  EXPECT_EQ(m[2].depth[0], 500u);
}

TEST_F(IndexLookupTest, HoleOffThePromptDoesNotShortenIt) {
  index_.ApplyBatch(1, Batch({Store(Hashes(100, 130), std::nullopt, Range(0, 30)),
                              Store({200, 201}, 109, {77, 78}), Remove({200})}));
  EXPECT_EQ(ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, 30))))[1].depth[0], 30u);
}

TEST_F(IndexLookupTest, ChildCountsBeyondOneByteStayExact) {
  // 1,000 children of block 20 take its one-byte kids counter past 254 into the side table
  // and back: hole tracking must stay exact on the way up and down.
  index_.ApplyBatch(1, Batch({Store(Hashes(1, 41), std::nullopt, Range(1, 41))}));
  index_.ApplyBatch(2, Batch({Store(Hashes(1, 41), std::nullopt, Range(1, 41))}));
  KvEventBatch children;
  for (std::uint32_t k = 0; k < 1000; ++k) {
    children.events.push_back(Store({1000 + k}, 21, {100000 + k}));
  }
  index_.ApplyBatch(1, children);
  // Block 20 (hash 21) evicted while 1,001 children are held: a hole at depth 20.
  index_.ApplyBatch(1, Batch({Remove({21})}));
  auto m = ByWorker(index_.Lookup(PromptKeys(keyer_, Range(1, 41))));
  EXPECT_EQ(m[1], Match(1, 20, 20, 20, 20, 20));
  EXPECT_EQ(m[2], Match(2, 40, 40, 40, 40, 40));
  // Down through 255 to two children (block 21 and one new one): still a hole.
  KvEventBatch evictions;
  for (std::uint32_t k = 0; k < 999; ++k) evictions.events.push_back(Remove({1000 + k}));
  index_.ApplyBatch(1, evictions);
  EXPECT_EQ(ByWorker(index_.Lookup(PromptKeys(keyer_, Range(1, 41))))[1].depth[0], 20u);
  index_.ApplyBatch(1, Batch({Store({21}, 20, {21})}));
  EXPECT_EQ(ByWorker(index_.Lookup(PromptKeys(keyer_, Range(1, 41))))[1].depth[0], 40u);
  // Every child gone and the block back: the worker is clean, its entries exactly its blocks.
  index_.ApplyBatch(1, Batch({Remove({1999})}));
  EXPECT_EQ(index_.stats().entries, 80u);
  EXPECT_EQ(index_.stats().nodes, 40u);
}

TEST_F(IndexLookupTest, ReferenceCountSaturationIsCountedAndIgnored) {
  KvEventBatch b;
  for (int k = 0; k < 256; ++k) b.events.push_back(Store({1}, std::nullopt, {1}));
  index_.ApplyBatch(1, b);
  EXPECT_EQ(index_.counters().ref_overflow, 1u);
  KvEventBatch r;
  for (int k = 0; k < 254; ++k) r.events.push_back(Remove({1}));
  index_.ApplyBatch(1, r);
  EXPECT_EQ(ByWorker(index_.Lookup(PromptKeys(keyer_, {1})))[1].depth[0], 1u);
  index_.ApplyBatch(1, Batch({Remove({1})}));
  EXPECT_TRUE(index_.Lookup(PromptKeys(keyer_, {1})).empty());
  EXPECT_EQ(index_.stats().engine_hashes, 0u);
}

// The lookup finds every drop of a search segment in rounds that split all intervals with a
// drop at once; adjacent and equal depths in one gallop interval must each come out exact.
TEST_F(IndexLookupTest, AdjacentAndEqualDropsInOneIntervalAreEachExact) {
  const std::vector<std::uint32_t> depths = {700, 701, 702, 702, 703, 705, 1000, 1023, 1024};
  for (std::size_t w = 0; w < depths.size(); ++w) {
    const std::uint64_t base = 100'000 * (w + 1);
    index_.ApplyBatch(
        w, Batch({Store(Hashes(base, base + depths[w]), std::nullopt, Range(0, depths[w]))}));
  }
  auto m = ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, 1024))));
  ASSERT_EQ(m.size(), depths.size());
  for (std::size_t w = 0; w < depths.size(); ++w) {
    EXPECT_EQ(m[w], GpuPrefix(w, depths[w])) << "worker " << w;
  }
}

// Many workers with random GPU and CPU depths and random evicted GPU blocks (holes, hence
// barriers) against depths computed from what each worker was given.
TEST_F(IndexLookupTest, RandomDepthsAndHolesOverManyWorkersAreExact) {
  constexpr std::uint32_t kBlocks = 300;
  constexpr WorkerId kWorkers = 48;
  std::mt19937_64 rng(11);
  std::vector<WorkerMatch> expected;
  for (WorkerId w = 0; w < kWorkers; ++w) {
    const std::uint64_t base = 10'000 * (w + 1);
    const std::uint32_t gpu = static_cast<std::uint32_t>(rng() % (kBlocks + 1));
    const std::uint32_t cpu = static_cast<std::uint32_t>(rng() % 4 == 0 ? rng() % kBlocks : 0);
    std::vector<bool> in_gpu(kBlocks, false), in_cpu(kBlocks, false);
    // One batch per event (GCC 12 warns falsely on a conditional push_back of a variant).
    if (gpu > 0) {
      index_.ApplyBatch(w, Batch({Store(Hashes(base, base + gpu), std::nullopt, Range(0, gpu))}));
    }
    if (cpu > 0) {
      index_.ApplyBatch(
          w, Batch({Store(Hashes(base, base + cpu), std::nullopt, Range(0, cpu), "CPU")}));
    }
    for (std::uint32_t k = 0; k < gpu; ++k) in_gpu[k] = true;
    for (std::uint32_t k = 0; k < cpu; ++k) in_cpu[k] = true;
    if (gpu > 2 && rng() % 3 == 0) {
      for (int h = 0; h < 3; ++h) {
        const std::uint32_t k = static_cast<std::uint32_t>(rng() % (gpu - 1));
        if (!in_gpu[k]) continue;
        index_.ApplyBatch(w, Batch({Remove({base + k})}));
        in_gpu[k] = false;
      }
    }
    auto prefix = [&](auto held) {
      std::uint32_t d = 0;
      while (d < kBlocks && held(d)) ++d;
      return d;
    };
    const std::uint32_t g = prefix([&](std::uint32_t k) { return in_gpu[k]; });
    const std::uint32_t any = prefix([&](std::uint32_t k) { return in_gpu[k] || in_cpu[k]; });
    // CPU, and so DISK and SHARED, count a block held on GPU or CPU: the any-tier prefix.
    if (in_gpu[0] || in_cpu[0]) expected.push_back(Match(w, g, any, any, any, any));
  }
  auto m = ByWorker(index_.Lookup(PromptKeys(keyer_, Range(0, kBlocks))));
  ASSERT_EQ(m.size(), expected.size());
  for (const WorkerMatch& e : expected) EXPECT_EQ(m[e.worker], e) << "worker " << e.worker;
}

}  // namespace
}  // namespace kvroute::kv
