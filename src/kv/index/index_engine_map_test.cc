#include "kv/index/index_engine_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <unordered_map>

namespace kvroute::kv {
namespace {

// Stands in for KvIndex: one worker's entries, each keeping the bottom half of the hash of
// its primary mapping (EngineMap's confirmation), and which node has a live primary.
struct FakeEntries {
  std::unordered_map<std::uint32_t, std::uint32_t> lo;            // node -> hash_lo
  std::unordered_map<std::uint32_t, std::uint64_t> primary_hash;  // node -> hash, while live
  auto LoOf() const {
    return [this](std::uint32_t node) { return lo.at(node); };
  }
  // Maps a new hash to `node` the way KvIndex does: the entry's own slot if free, else the
  // overflow map.
  EngineMap::Mapping Put(EngineMap& m, std::uint64_t hash, std::uint32_t node) {
    auto [mapped, inserted] = m.Insert(hash, LoOf());
    EXPECT_TRUE(inserted);
    if (primary_hash.contains(node)) return m.MoveToExtra(hash, mapped, node);
    EngineMap::SetPrimary(mapped, node);
    lo[node] = EngineMap::Lo(hash);
    primary_hash[node] = hash;
    return mapped;
  }
  void Forget(std::uint64_t hash, std::uint32_t node) {
    auto it = primary_hash.find(node);
    if (it != primary_hash.end() && it->second == hash) primary_hash.erase(it);
  }
};

TEST(EngineMapTest, FirstReferenceNeedsNoSideEntryAndCountsOne) {
  EngineMap m;
  FakeEntries e;
  e.Put(m, 42, 7);
  ASSERT_TRUE(m.Find(42, e.LoOf()));
  EXPECT_EQ(EngineMap::Node(*m.Find(42, e.LoOf()).value), 7u);
  EXPECT_FALSE(m.Find(42, e.LoOf()).extra);
  EXPECT_EQ(m.Refs(42, *m.Find(42, e.LoOf()).value), 1u);
  EXPECT_FALSE(m.Find(43, e.LoOf()));
}

TEST(EngineMapTest, ExtraReferencesKeepTheNodeAndGoAwayOneByOne) {
  EngineMap m;
  FakeEntries e;
  e.Put(m, 5, 9);
  m.AddRef(5, m.Find(5, e.LoOf()));
  m.AddRef(5, m.Find(5, e.LoOf()));
  EXPECT_EQ(EngineMap::Node(*m.Find(5, e.LoOf()).value), 9u);
  EXPECT_EQ(m.Refs(5, *m.Find(5, e.LoOf()).value), 3u);
  m.DropRef(5, m.Find(5, e.LoOf()));
  EXPECT_EQ(m.Refs(5, *m.Find(5, e.LoOf()).value), 2u);
  m.DropRef(5, m.Find(5, e.LoOf()));
  EXPECT_EQ(m.Refs(5, *m.Find(5, e.LoOf()).value), 1u);
  EXPECT_EQ(EngineMap::Node(*m.Find(5, e.LoOf()).value), 9u);
  m.DropRef(5, m.Find(5, e.LoOf()));
  EXPECT_FALSE(m.Find(5, e.LoOf()));
  EXPECT_TRUE(m.empty());
}

// A hash whose fingerprint (top half of its mix) equals a stored one's but whose bottom half
// differs is not found: the entry's half decides.
TEST(EngineMapTest, AFingerprintMatchIsConfirmedByTheEntrysHalf) {
  EngineMap m;
  FakeEntries e;
  const std::uint64_t stored = 0x1234567890ABCDEFULL;
  e.Put(m, stored, 3);
  const std::uint64_t twin = UnmixKey(MixKey(stored) ^ 1);  // same top half, other bottom
  ASSERT_EQ(MixKey(twin) >> 32, MixKey(stored) >> 32);
  EXPECT_FALSE(m.Find(twin, e.LoOf()));
  e.Put(m, twin, 4);
  EXPECT_EQ(EngineMap::Node(*m.Find(stored, e.LoOf()).value), 3u);
  EXPECT_EQ(EngineMap::Node(*m.Find(twin, e.LoOf()).value), 4u);
  m.DropRef(stored, m.Find(stored, e.LoOf()));
  EXPECT_FALSE(m.Find(stored, e.LoOf()));
  EXPECT_EQ(EngineMap::Node(*m.Find(twin, e.LoOf()).value), 4u);
}

TEST(EngineMapTest, SecondHashOfANodeLivesInTheOverflowMap) {
  EngineMap m;
  FakeEntries e;
  e.Put(m, 100, 1);
  const EngineMap::Mapping second = e.Put(m, 200, 1);
  EXPECT_TRUE(second.extra);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(EngineMap::Node(*m.Find(200, e.LoOf()).value), 1u);
  EXPECT_TRUE(m.Find(200, e.LoOf()).extra);
  // The primary goes first; the overflow mapping still resolves.
  m.DropRef(100, m.Find(100, e.LoOf()));
  e.Forget(100, 1);
  EXPECT_FALSE(m.Find(100, e.LoOf()));
  EXPECT_EQ(EngineMap::Node(*m.Find(200, e.LoOf()).value), 1u);
  std::size_t seen = 0;
  m.ForEach(e.LoOf(), [&](std::uint64_t hash, std::uint32_t node, std::uint32_t refs) {
    ++seen;
    EXPECT_EQ(hash, 200u);
    EXPECT_EQ(node, 1u);
    EXPECT_EQ(refs, 1u);
  });
  EXPECT_EQ(seen, 1u);
}

TEST(EngineMapTest, AgreesWithAMapOfCountsUnderRandomReferences) {
  std::mt19937_64 rng(3);
  EngineMap m;
  FakeEntries e;
  std::map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> model;  // node, refs
  for (int step = 0; step < 100000; ++step) {
    const std::uint64_t hash = rng() % 3000;
    auto it = model.find(hash);
    if (rng() % 2 == 0) {
      if (it == model.end()) {
        // Few nodes, so several hashes share one (overflow mappings) now and then.
        const auto node = static_cast<std::uint32_t>(rng() % 2500);
        e.Put(m, hash, node);
        model[hash] = {node, 1};
      } else {
        auto [mapped, inserted] = m.Insert(hash, e.LoOf());
        ASSERT_FALSE(inserted);
        m.AddRef(hash, mapped);
        ++it->second.second;
      }
    } else if (it != model.end()) {
      m.DropRef(hash, m.Find(hash, e.LoOf()));
      if (--it->second.second == 0) {
        e.Forget(hash, it->second.first);
        model.erase(it);
      }
    } else {
      ASSERT_FALSE(m.Find(hash, e.LoOf()));
    }
  }
  ASSERT_EQ(m.size(), model.size());
  std::size_t seen = 0;
  m.ForEach(e.LoOf(), [&](std::uint64_t hash, std::uint32_t node, std::uint32_t refs) {
    ++seen;
    auto it = model.find(hash);
    ASSERT_NE(it, model.end());
    EXPECT_EQ(node, it->second.first);
    EXPECT_EQ(refs, it->second.second);
  });
  EXPECT_EQ(seen, model.size());
  for (const auto& [hash, v] : model) {
    const EngineMap::Mapping found = m.Find(hash, e.LoOf());
    ASSERT_TRUE(found);
    EXPECT_EQ(EngineMap::Node(*found.value), v.first);
  }
}

}  // namespace
}  // namespace kvroute::kv
