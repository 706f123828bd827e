#include "kv/approx_predicted.h"

#include <gtest/gtest.h>

#include <map>

namespace kvroute::kv {
namespace {

using std::chrono::seconds;

std::map<WorkerId, std::uint32_t> Depths(const std::vector<PredictedMatch>& v) {
  std::map<WorkerId, std::uint32_t> out;
  for (const auto& m : v) out[m.worker] = m.depth;
  return out;
}

const std::vector<BlockKey> kPrompt = {11, 12, 13, 14, 15};

TEST(PredictedBlocksTest, RecordedPrefixMatchesUpToDivergence) {
  PredictedBlocks p;
  p.Record(1, kPrompt, Nanos(0));
  EXPECT_EQ(Depths(p.Lookup(std::vector<BlockKey>{11, 12, 13, 99}, Nanos(1))),
            (std::map<WorkerId, std::uint32_t>{{1, 3}}));
}

TEST(PredictedBlocksTest, BlocksExpireAfterTtl) {
  PredictedBlocks p({.ttl = seconds(5), .default_capacity_blocks = 100});
  p.Record(1, kPrompt, Nanos(0));
  EXPECT_EQ(Depths(p.Lookup(kPrompt, seconds(4)))[1], 5u);
  EXPECT_TRUE(p.Lookup(kPrompt, seconds(5)).empty());
}

TEST(PredictedBlocksTest, RecordingAgainRefreshesExpiry) {
  PredictedBlocks p({.ttl = seconds(5), .default_capacity_blocks = 100});
  p.Record(1, kPrompt, Nanos(0));
  p.Record(1, std::vector<BlockKey>{11, 12}, seconds(4));
  EXPECT_EQ(Depths(p.Lookup(kPrompt, seconds(6)))[1], 2u);
}

TEST(PredictedBlocksTest, CapacityEvictsTailFirst) {
  PredictedBlocks p({.ttl = seconds(100), .default_capacity_blocks = 100});
  p.SetCapacity(1, 4);
  p.Record(1, std::vector<BlockKey>{1, 2, 3}, Nanos(0));
  p.Record(1, std::vector<BlockKey>{7, 8, 9}, Nanos(1));  // evicts 3 (the LRU tail), then 2
  EXPECT_EQ(Depths(p.Lookup(std::vector<BlockKey>{1, 2, 3}, Nanos(2)))[1], 1u);
  EXPECT_EQ(Depths(p.Lookup(std::vector<BlockKey>{7, 8, 9}, Nanos(2)))[1], 3u);
  EXPECT_EQ(p.size(), 4u);
}

TEST(PredictedBlocksTest, PromptLongerThanCapacityKeepsItsHead) {
  PredictedBlocks p({.ttl = seconds(100), .default_capacity_blocks = 3});
  p.Record(1, kPrompt, Nanos(0));
  EXPECT_EQ(Depths(p.Lookup(kPrompt, Nanos(1)))[1], 3u);
}

TEST(PredictedBlocksTest, ShrinkingCapacityEvicts) {
  PredictedBlocks p;
  p.Record(1, kPrompt, Nanos(0));
  p.SetCapacity(1, 2);
  EXPECT_EQ(Depths(p.Lookup(kPrompt, Nanos(1)))[1], 2u);
  p.SetCapacity(1, 0);
  EXPECT_TRUE(p.Lookup(kPrompt, Nanos(1)).empty());
  p.Record(1, kPrompt, Nanos(2));
  EXPECT_EQ(p.size(), 0u);
}

TEST(PredictedBlocksTest, WorkersAreIndependent) {
  PredictedBlocks p;
  p.Record(1, kPrompt, Nanos(0));
  p.Record(2, std::vector<BlockKey>{11, 12}, Nanos(0));
  EXPECT_EQ(Depths(p.Lookup(kPrompt, Nanos(1))),
            (std::map<WorkerId, std::uint32_t>{{1, 5}, {2, 2}}));
  p.RemoveWorker(1);
  EXPECT_EQ(Depths(p.Lookup(kPrompt, Nanos(1))), (std::map<WorkerId, std::uint32_t>{{2, 2}}));
}

TEST(PredictedBlocksTest, ExpireDropsExpiredBlocks) {
  PredictedBlocks p({.ttl = seconds(1), .default_capacity_blocks = 100});
  p.Record(1, kPrompt, Nanos(0));
  p.Record(2, kPrompt, seconds(5));
  p.Expire(seconds(2));
  EXPECT_EQ(p.size(), 5u);
}

}  // namespace
}  // namespace kvroute::kv
