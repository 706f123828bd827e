#include "kv/index_flat_map.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace kvroute::kv {
namespace {

TEST(IndexFlatMapTest, KeyZeroIsAnOrdinaryKey) {
  IndexFlatMap<int> m;
  EXPECT_TRUE(m.Insert(0, 7).second);
  EXPECT_FALSE(m.Insert(0, 8).second);
  EXPECT_EQ(*m.Find(0), 7);
  EXPECT_EQ(m.size(), 1u);
  EXPECT_TRUE(m.Erase(0));
  EXPECT_EQ(m.Find(0), nullptr);
}

TEST(IndexFlatMapTest, AgreesWithUnorderedMapUnderRandomInsertsAndErases) {
  std::mt19937_64 rng(42);
  IndexFlatMap<std::uint32_t> m;
  std::unordered_map<std::uint64_t, std::uint32_t> ref;
  for (int step = 0; step < 200000; ++step) {
    // Small key space so erases hit and probe runs wrap and shift.
    std::uint64_t key = rng() % 5000;
    if (rng() % 3 == 0) {
      EXPECT_EQ(m.Erase(key), ref.erase(key) == 1);
    } else {
      auto [v, inserted] = m.Insert(key, static_cast<std::uint32_t>(step));
      auto [it, ref_inserted] = ref.emplace(key, static_cast<std::uint32_t>(step));
      ASSERT_EQ(inserted, ref_inserted);
      EXPECT_EQ(*v, it->second);
    }
  }
  ASSERT_EQ(m.size(), ref.size());
  for (const auto& [k, v] : ref) {
    ASSERT_NE(m.Find(k), nullptr);
    EXPECT_EQ(*m.Find(k), v);
  }
  std::size_t visited = 0;
  m.ForEach([&](std::uint64_t k, std::uint32_t v) {
    ++visited;
    EXPECT_EQ(ref.at(k), v);
  });
  EXPECT_EQ(visited, ref.size());
}

TEST(IndexFlatMapTest, ShrinksAfterMassErase) {
  IndexFlatMap<int> m;
  for (std::uint64_t k = 1; k <= 10000; ++k) m.Insert(k, 1);
  std::size_t big = m.capacity_bytes();
  for (std::uint64_t k = 1; k <= 9990; ++k) m.Erase(k);
  EXPECT_LT(m.capacity_bytes(), big / 8);
  for (std::uint64_t k = 9991; k <= 10000; ++k) EXPECT_NE(m.Find(k), nullptr);
}

}  // namespace
}  // namespace kvroute::kv
