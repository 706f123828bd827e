#include "kv/index_engine_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace kvroute::kv {
namespace {

TEST(EngineMapTest, FirstReferenceNeedsNoSideEntryAndCountsOne) {
  EngineMap m;
  auto [value, inserted] = m.Insert(42);
  ASSERT_TRUE(inserted);
  EngineMap::SetNode(value, 7);
  ASSERT_NE(m.Find(42), nullptr);
  EXPECT_EQ(EngineMap::Node(*m.Find(42)), 7u);
  EXPECT_EQ(m.Refs(42, *m.Find(42)), 1u);
}

TEST(EngineMapTest, ExtraReferencesKeepTheNodeAndGoAwayOneByOne) {
  EngineMap m;
  EngineMap::SetNode(m.Insert(5).first, 9);
  m.AddRef(5, m.Find(5));
  m.AddRef(5, m.Find(5));
  EXPECT_EQ(EngineMap::Node(*m.Find(5)), 9u);
  EXPECT_EQ(m.Refs(5, *m.Find(5)), 3u);
  m.DropRef(5, m.Find(5));
  EXPECT_EQ(m.Refs(5, *m.Find(5)), 2u);
  m.DropRef(5, m.Find(5));
  EXPECT_EQ(m.Refs(5, *m.Find(5)), 1u);
  EXPECT_EQ(EngineMap::Node(*m.Find(5)), 9u);
  m.DropRef(5, m.Find(5));
  EXPECT_EQ(m.Find(5), nullptr);
  EXPECT_TRUE(m.empty());
}

TEST(EngineMapTest, AgreesWithAMapOfCountsUnderRandomReferences) {
  std::mt19937_64 rng(3);
  EngineMap m;
  std::map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> model;  // node, refs
  for (int step = 0; step < 100000; ++step) {
    const std::uint64_t hash = rng() % 3000;
    auto it = model.find(hash);
    if (rng() % 2 == 0) {
      auto [value, inserted] = m.Insert(hash);
      ASSERT_EQ(inserted, it == model.end());
      if (inserted) {
        const auto node = static_cast<std::uint32_t>(rng() % EngineMap::kMaxNode);
        EngineMap::SetNode(value, node);
        model[hash] = {node, 1};
      } else {
        m.AddRef(hash, value);
        ++it->second.second;
      }
    } else if (it != model.end()) {
      m.DropRef(hash, m.Find(hash));
      if (--it->second.second == 0) model.erase(it);
    }
  }
  ASSERT_EQ(m.size(), model.size());
  std::size_t seen = 0;
  m.ForEach([&](std::uint64_t hash, std::uint32_t node, std::uint32_t refs) {
    ++seen;
    auto it = model.find(hash);
    ASSERT_NE(it, model.end());
    EXPECT_EQ(node, it->second.first);
    EXPECT_EQ(refs, it->second.second);
  });
  EXPECT_EQ(seen, model.size());
}

}  // namespace
}  // namespace kvroute::kv
