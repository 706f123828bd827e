#include "kv/index/index_flat_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <unordered_map>
#include <vector>

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

// Empty array slots hold the largest mixed key, so the one key that mixes to it lives in a
// side slot: it is inserted, found, listed, erased and kept apart from its neighbours like
// any other.
TEST(IndexFlatMapTest, TheKeyWhoseMixMarksEmptySlotsIsAnOrdinaryKey) {
  const std::uint64_t special = UnmixKey(~std::uint64_t{0});
  ASSERT_EQ(MixKey(special), ~std::uint64_t{0});
  const std::uint64_t below = UnmixKey(~std::uint64_t{0} - 1);  // the last home, in the array
  IndexFlatMap<int> m;
  EXPECT_TRUE(m.Insert(special, 7).second);
  EXPECT_TRUE(m.Insert(below, 9).second);
  EXPECT_FALSE(m.Insert(special, 8).second);
  EXPECT_EQ(*m.Find(special), 7);
  EXPECT_EQ(*m.Find(below), 9);
  EXPECT_EQ(m.size(), 2u);
  std::map<std::uint64_t, int> seen;
  m.ForEach([&](std::uint64_t k, int v) { seen[k] = v; });
  EXPECT_EQ(seen, (std::map<std::uint64_t, int>{{special, 7}, {below, 9}}));
  EXPECT_TRUE(m.Erase(special));
  EXPECT_EQ(m.Find(special), nullptr);
  EXPECT_EQ(*m.Find(below), 9);
  EXPECT_TRUE(m.CheckLayout());
}

// MixKey is a bijection: UnmixKey inverts it (ForEach and snapshots list keys from mixes).
TEST(IndexFlatMapTest, UnmixKeyInvertsMixKey) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 10000; ++i) {
    const std::uint64_t k = rng();
    ASSERT_EQ(UnmixKey(MixKey(k)), k) << k;
    ASSERT_EQ(MixKey(UnmixKey(k)), k) << k;
  }
  EXPECT_EQ(MixKey(0), 0u);
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

// The hash folds the top half onto the bottom one: keys that differ only in their high bits
// (a worker id in the top bits) stay distinct and findable through inserts and erases.
TEST(IndexFlatMapTest, KeysDifferingOnlyInHighBitsAreAllKept) {
  IndexFlatMap<std::uint32_t> m;
  for (std::uint64_t i = 1; i <= 4096; ++i) m.Insert(i << 52, static_cast<std::uint32_t>(i));
  for (std::uint64_t i = 1; i <= 4096; i += 2) EXPECT_TRUE(m.Erase(i << 52));
  EXPECT_EQ(m.size(), 2048u);
  for (std::uint64_t i = 2; i <= 4096; i += 2) {
    ASSERT_NE(m.Find(i << 52), nullptr) << i;
    EXPECT_EQ(*m.Find(i << 52), i);
    EXPECT_EQ(m.Find((i - 1) << 52), nullptr);
  }
}

// EraseAt removes exactly the element its value pointer names, key 0 included, and keeps
// every other element findable (the backward shift is the one Erase uses).
TEST(IndexFlatMapTest, EraseAtRemovesTheElementItsValuePointsTo) {
  IndexFlatMap<std::uint32_t> m;
  std::map<std::uint64_t, std::uint32_t> ref;
  std::mt19937_64 rng(5);
  for (int step = 0; step < 20000; ++step) {
    const std::uint64_t k = rng() % 3000;  // small range: collisions, key 0, re-inserts
    if (rng() % 3 != 0) {
      m.Insert(k, static_cast<std::uint32_t>(k + 1));
      ref[k] = static_cast<std::uint32_t>(k + 1);
    } else if (const std::uint32_t* v = m.Find(k)) {
      m.EraseAt(v);
      ref.erase(k);
    }
  }
  ASSERT_EQ(m.size(), ref.size());
  for (const auto& [k, v] : ref) {
    ASSERT_NE(m.Find(k), nullptr) << k;
    EXPECT_EQ(*m.Find(k), v);
  }
}

// Capacities are not powers of two: while a table grows, its load stays between the
// maximum (TableMustGrow) and the maximum over the growth factor (doubling left it as low
// as 0.375), which is where the index's bytes per entry go.
TEST(IndexFlatMapTest, LoadStaysWithinOneGrowthStepBelowTheMaximumWhileGrowing) {
  IndexFlatMap<std::uint32_t> m;
  constexpr std::size_t kSlotBytes = sizeof(std::uint64_t) + sizeof(std::uint32_t);
  const double max_load = static_cast<double>(kTableMaxLoadNum) / kTableMaxLoadDen;
  const double min_load = max_load / (1.0 + 1.0 / kTableGrowthDiv);
  for (std::uint64_t k = 1; k <= 200'000; ++k) {
    m.Insert(k * 0x9E3779B97F4A7C15ULL, 1);
    if (k < 256) continue;  // small capacities round down: 16, 20, 25, ...
    const double load = static_cast<double>(k) / m.capacity();
    ASSERT_GT(load, min_load - 0.01) << k;
    ASSERT_LE(load, max_load) << k;
    // Beyond the nominal capacity the arrays hold TableSlack (<= 32) slots plus however far
    // the last run passed the last home when the table was rehashed (a few slots).
    ASSERT_LE(m.capacity_bytes(), (m.capacity() + 64) * kSlotBytes) << k;
  }
}

// Past 16 MiB per array the map allocates huge-page-aligned memory; growing into that size,
// rehashing there and shrinking back out of it keeps every element.
TEST(IndexFlatMapTest, LargeTablesKeepEveryElementAcrossGrowthAndShrink) {
  IndexFlatMap<std::uint8_t> m;
  constexpr std::uint64_t kN = 1'700'000;  // / 0.75 load > 2^21 slots: 16 MiB of keys
  for (std::uint64_t k = 1; k <= kN; ++k) m.Insert(k * 0x9E3779B97F4A7C15ULL, k & 0xFF);
  EXPECT_GE(m.capacity_bytes(), std::size_t{16} << 20);
  for (std::uint64_t k = 1; k <= kN; ++k) {
    const std::uint8_t* v = m.Find(k * 0x9E3779B97F4A7C15ULL);
    ASSERT_NE(v, nullptr) << k;
    ASSERT_EQ(*v, k & 0xFF);
  }
  for (std::uint64_t k = 1; k <= kN - 100; ++k) m.Erase(k * 0x9E3779B97F4A7C15ULL);
  EXPECT_EQ(m.size(), 100u);
  EXPECT_LT(m.capacity_bytes(), std::size_t{1} << 20);
  for (std::uint64_t k = kN - 99; k <= kN; ++k)
    EXPECT_NE(m.Find(k * 0x9E3779B97F4A7C15ULL), nullptr);
}

// Sorted probing's invariant (every element at or after its home with no empty slot
// between, runs sorted by hash, a trailing empty sentinel) holds after every operation of a
// random stream that grows and shrinks the table, and the contents match a reference map.
TEST(IndexFlatMapTest, LayoutInvariantHoldsAfterEveryInsertAndErase) {
  std::mt19937_64 rng(7);
  IndexFlatMap<std::uint32_t> m;
  std::unordered_map<std::uint64_t, std::uint32_t> ref;
  for (int step = 0; step < 30000; ++step) {
    const std::uint64_t space = step < 15000 ? 3000 : 200;  // grow, then shrink
    const std::uint64_t key = rng() % space;
    if (rng() % 3 == 0 || step >= 15000) {
      ASSERT_EQ(m.Erase(key), ref.erase(key) == 1) << "step " << step;
    } else {
      m.Insert(key, static_cast<std::uint32_t>(step));
      ref.emplace(key, static_cast<std::uint32_t>(step));
    }
    ASSERT_TRUE(m.CheckLayout()) << "step " << step;
    ASSERT_EQ(m.size(), ref.size()) << "step " << step;
  }
  for (const auto& [k, v] : ref) {
    ASSERT_NE(m.Find(k), nullptr) << k;
    EXPECT_EQ(*m.Find(k), v);
  }
}

// A miss stops at the first larger hash, not at an empty slot: absent keys are reported
// absent at every load, including keys whose home lies inside long runs.
TEST(IndexFlatMapTest, AbsentKeysAreNotFoundInsideLongRuns) {
  IndexFlatMap<std::uint32_t> m;
  for (std::uint64_t k = 1; k <= 3000; k += 2) m.Insert(k, static_cast<std::uint32_t>(k));
  ASSERT_TRUE(m.CheckLayout());
  for (std::uint64_t k = 2; k <= 3000; k += 2) EXPECT_EQ(m.Find(k), nullptr) << k;
  for (std::uint64_t k = 1; k <= 3000; k += 2) EXPECT_NE(m.Find(k), nullptr) << k;
}

// Keys whose 32-bit hashes are all equal share one home: the run outgrows the slack slots
// at the end of the array, the table rehashes with more slack, and every key stays
// findable and erasable (slow, never wrong).
TEST(IndexFlatMapTest, KeysWithOneHashOutgrowTheSlackAndStayFindable) {
  constexpr std::uint64_t kPhi = 0x9E3779B97F4A7C15ULL;
  std::uint64_t inv = kPhi;  // Newton: inverse of an odd number mod 2^64
  for (int i = 0; i < 6; ++i) inv *= 2 - kPhi * inv;
  // A fold (key ^ key >> 32) of P * phi^-1 multiplies back to P: folds for products
  // 0xFFFFFFFF'00000000 + j all hash to 0xFFFFFFFF, so they share the table's last home.
  std::vector<std::uint64_t> keys;
  for (std::uint64_t j = 0; j < 100; ++j) {
    const std::uint64_t fold = (0xFFFFFFFFULL << 32) * inv + j * inv;  // product top = ~0
    const std::uint64_t hi = fold >> 32;
    keys.push_back((hi << 32) | ((fold ^ hi) & 0xFFFFFFFFULL));
  }
  const auto hash = [&](std::uint64_t k) {
    return static_cast<std::uint32_t>(((k ^ (k >> 32)) * kPhi) >> 32);
  };
  for (std::uint64_t k : keys) ASSERT_EQ(hash(k), 0xFFFFFFFFu) << k;
  IndexFlatMap<std::uint32_t> m;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_TRUE(m.Insert(keys[i], static_cast<std::uint32_t>(i)).second);
    ASSERT_TRUE(m.CheckLayout()) << i;
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_NE(m.Find(keys[i]), nullptr) << i;
    EXPECT_EQ(*m.Find(keys[i]), i);
  }
  for (std::size_t i = 0; i < keys.size(); i += 2) EXPECT_TRUE(m.Erase(keys[i]));
  ASSERT_TRUE(m.CheckLayout());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(m.Find(keys[i]) != nullptr, i % 2 == 1) << i;
  }
}

}  // namespace
}  // namespace kvroute::kv
