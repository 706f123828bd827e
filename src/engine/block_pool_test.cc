#include "engine/block_pool.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <variant>
#include <vector>

namespace kvroute::engine {
namespace {

BlockMeta Meta(kv::BlockKey key) {
  BlockMeta m;
  m.key = key;
  m.hash = key * 10;
  return m;
}

std::vector<kv::EngineHash> RemovedHashes(const std::vector<kv::KvEvent>& events,
                                          const char* medium) {
  std::vector<kv::EngineHash> out;
  for (const kv::KvEvent& e : events) {
    if (const auto* r = std::get_if<kv::BlockRemoved>(&e); r && r->medium == medium) {
      out.insert(out.end(), r->block_hashes.begin(), r->block_hashes.end());
    }
  }
  return out;
}

TEST(BlockPoolTest, StartsAllFreeAndUncached) {
  BlockPool pool(8, 16, nullptr);
  EXPECT_EQ(pool.num_blocks(), 8);
  EXPECT_EQ(pool.num_free(), 8);
  EXPECT_EQ(pool.num_cached(), 0);
}

TEST(BlockPoolTest, AllocateFailsWithoutSideEffectsWhenShort) {
  BlockPool pool(4, 16, nullptr);
  std::vector<kv::KvEvent> events;
  std::vector<BlockId> ids;
  EXPECT_FALSE(pool.Allocate(5, &events, &ids));
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(pool.num_free(), 4);
  ASSERT_TRUE(pool.Allocate(4, &events, &ids));
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_TRUE(events.empty());
}

TEST(BlockPoolTest, FreedCachedBlocksStayCachedUntilSpaceIsNeeded) {
  BlockPool pool(4, 16, nullptr);
  std::vector<kv::KvEvent> events;
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(2, &events, &ids));
  ASSERT_TRUE(pool.Cache(ids[0], Meta(1)));
  ASSERT_TRUE(pool.Cache(ids[1], Meta(2)));
  pool.Free(ids);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.Lookup(1), ids[0]);
  EXPECT_EQ(pool.Lookup(2), ids[1]);
  // Two never-used blocks are in front of the queue: allocating them evicts nothing.
  std::vector<BlockId> more;
  ASSERT_TRUE(pool.Allocate(2, &events, &more));
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(pool.num_cached(), 2);
}

TEST(BlockPoolTest, EvictsLeastRecentlyFreedFirstAndEmitsOneRemovalPerBlock) {
  BlockPool pool(3, 16, nullptr);
  std::vector<kv::KvEvent> events;
  std::vector<BlockId> a, b, c;
  ASSERT_TRUE(pool.Allocate(1, &events, &a));
  ASSERT_TRUE(pool.Allocate(1, &events, &b));
  ASSERT_TRUE(pool.Allocate(1, &events, &c));
  pool.Cache(a[0], Meta(1));
  pool.Cache(b[0], Meta(2));
  pool.Cache(c[0], Meta(3));
  pool.Free(b);  // freed first: evicted first
  pool.Free(c);
  pool.Free(a);
  std::vector<BlockId> got;
  ASSERT_TRUE(pool.Allocate(2, &events, &got));
  EXPECT_EQ(RemovedHashes(events, "GPU"), (std::vector<kv::EngineHash>{20, 30}));
  ASSERT_EQ(events.size(), 2u);
  const auto& r = std::get<kv::BlockRemoved>(events[0]);
  EXPECT_EQ(r.block_hashes.size(), 1u);
  EXPECT_EQ(r.group_idx, 0);
  EXPECT_FALSE(pool.Lookup(2).has_value());
  EXPECT_FALSE(pool.Lookup(3).has_value());
  EXPECT_TRUE(pool.Lookup(1).has_value());
}

TEST(BlockPoolTest, TouchingAFreeCachedBlockProtectsItFromEviction) {
  BlockPool pool(2, 16, nullptr);
  std::vector<kv::KvEvent> events;
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(2, &events, &ids));
  pool.Cache(ids[0], Meta(1));
  pool.Cache(ids[1], Meta(2));
  pool.Free(ids);
  pool.Touch(ids[0]);  // prefix hit on block 1
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.ref_count(ids[0]), 1);
  std::vector<BlockId> got;
  ASSERT_TRUE(pool.Allocate(1, &events, &got));
  EXPECT_EQ(RemovedHashes(events, "GPU"), (std::vector<kv::EngineHash>{20}));
  EXPECT_FALSE(pool.Allocate(1, &events, &got));
}

TEST(BlockPoolTest, SharedBlockIsFreedOnlyWhenTheLastReferenceGoes) {
  BlockPool pool(2, 16, nullptr);
  std::vector<kv::KvEvent> events;
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(1, &events, &ids));
  pool.Cache(ids[0], Meta(7));
  pool.Touch(ids[0]);  // a second request shares it
  EXPECT_EQ(pool.ref_count(ids[0]), 2);
  pool.Free(ids);
  EXPECT_EQ(pool.num_free(), 1);
  pool.Free(ids);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_TRUE(pool.Lookup(7).has_value());
}

TEST(BlockPoolTest, DuplicateKeyIsNotCachedTwice) {
  BlockPool pool(2, 16, nullptr);
  std::vector<kv::KvEvent> events;
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(2, &events, &ids));
  EXPECT_TRUE(pool.Cache(ids[0], Meta(5)));
  EXPECT_FALSE(pool.Cache(ids[1], Meta(5)));
  EXPECT_FALSE(pool.is_cached(ids[1]));
  EXPECT_EQ(pool.Lookup(5), ids[0]);
}

TEST(BlockPoolTest, EvictionOffloadsToTheCpuTierBeforeRemovingFromGpu) {
  LruTier tier(4, 16);
  BlockPool pool(1, 16, &tier);
  std::vector<kv::KvEvent> events;
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(1, &events, &ids));
  BlockMeta m = Meta(9);
  m.parent_hash = 80;
  m.payload = std::make_shared<const BlockPayload>(
      BlockPayload{.tokens = std::vector<TokenId>(16, 3), .lora_name = "ad"});
  pool.Cache(ids[0], m);
  pool.Free(ids);
  ids.clear();
  ASSERT_TRUE(pool.Allocate(1, &events, &ids));
  ASSERT_EQ(events.size(), 2u);
  const auto& stored = std::get<kv::BlockStored>(events[0]);
  EXPECT_EQ(stored.medium, "CPU");
  EXPECT_EQ(stored.block_hashes, (std::vector<kv::EngineHash>{90}));
  EXPECT_EQ(stored.parent_block_hash, 80u);
  EXPECT_EQ(stored.token_ids, std::vector<TokenId>(16, 3));
  EXPECT_EQ(stored.lora_name, "ad");
  EXPECT_EQ(stored.block_size, 16u);
  EXPECT_EQ(stored.group_idx, 0);
  EXPECT_EQ(stored.kv_cache_spec_kind, "full_attention");
  EXPECT_EQ(std::get<kv::BlockRemoved>(events[1]).medium, "GPU");
  EXPECT_NE(tier.Find(9), nullptr);
}

TEST(BlockPoolTest, ClearCacheForgetsKeysButKeepsAllocations) {
  BlockPool pool(2, 16, nullptr);
  std::vector<kv::KvEvent> events;
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(1, &events, &ids));
  pool.Cache(ids[0], Meta(1));
  pool.ClearCache();
  EXPECT_EQ(pool.num_cached(), 0);
  EXPECT_EQ(pool.num_used(), 1);
  EXPECT_TRUE(pool.CachedHashes().empty());
}

TEST(CpuTierTest, EvictsLeastRecentlyUsedAndEmitsCpuRemoval) {
  LruTier tier(2, 16);
  std::vector<kv::KvEvent> events;
  tier.Insert(Meta(1), &events);
  tier.Insert(Meta(2), &events);
  tier.Touch(1);  // 2 is now the LRU entry
  events.clear();
  tier.Insert(Meta(3), &events);
  ASSERT_EQ(events.size(), 2u);
  const auto& removed = std::get<kv::BlockRemoved>(events[0]);
  EXPECT_EQ(removed.medium, "CPU");
  EXPECT_EQ(removed.block_hashes, (std::vector<kv::EngineHash>{20}));
  EXPECT_EQ(std::get<kv::BlockStored>(events[1]).block_hashes, (std::vector<kv::EngineHash>{30}));
  EXPECT_EQ(tier.Find(2), nullptr);
  EXPECT_NE(tier.Find(1), nullptr);
  EXPECT_EQ(tier.size(), 2);
}

TEST(CpuTierTest, InsertingAPresentBlockOnlyRefreshesIt) {
  LruTier tier(2, 16);
  std::vector<kv::KvEvent> events;
  tier.Insert(Meta(1), &events);
  tier.Insert(Meta(2), &events);
  events.clear();
  tier.Insert(Meta(1), &events);  // refresh: 2 becomes LRU
  EXPECT_TRUE(events.empty());
  tier.Insert(Meta(3), &events);
  EXPECT_EQ(tier.Find(2), nullptr);
}

TEST(CpuTierTest, ZeroCapacityStoresNothing) {
  LruTier tier(0, 16);
  std::vector<kv::KvEvent> events;
  tier.Insert(Meta(1), &events);
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(tier.Find(1), nullptr);
}

// The flat prefix-cache table against a std::map model over many allocate / cache / free
// rounds with evictions: every key resolves to the block the model says (or to nothing),
// including keys whose probe runs were shifted back by earlier deletions.
TEST(BlockPoolTest, PrefixCacheTableMatchesAMapModelAcrossEvictions) {
  BlockPool pool(16, 16, nullptr);
  std::map<kv::BlockKey, BlockId> model;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 3000; ++round) {
    std::vector<kv::KvEvent> events;
    std::vector<BlockId> ids;
    ASSERT_TRUE(pool.Allocate(1 + static_cast<std::int64_t>(rng() % 4), &events, &ids));
    for (kv::EngineHash h : RemovedHashes(events, "GPU")) {
      ASSERT_EQ(model.erase(h / 10), 1u) << "round " << round;
    }
    for (BlockId id : ids) {
      const kv::BlockKey key = 1 + rng() % 64;  // small range: collisions and re-use
      const bool cached = pool.Cache(id, Meta(key));
      ASSERT_EQ(cached, !model.contains(key)) << "round " << round;
      if (cached) model[key] = id;
    }
    pool.Free(ids);
    ASSERT_EQ(pool.num_cached(), static_cast<std::int64_t>(model.size()));
    for (kv::BlockKey key = 1; key <= 64; ++key) {
      const auto it = model.find(key);
      const std::optional<BlockId> got = pool.Lookup(key);
      ASSERT_EQ(got.has_value(), it != model.end()) << "round " << round << " key " << key;
      if (got) {
        ASSERT_EQ(*got, it->second);
      }
    }
  }
}

}  // namespace
}  // namespace kvroute::engine
