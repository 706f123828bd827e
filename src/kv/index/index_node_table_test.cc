#include "kv/index/index_node_table.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

namespace kvroute::kv {
namespace {

constexpr std::uint64_t kPhi = 0x9E3779B97F4A7C15ULL;

// The table's keys live outside it (in KvIndex, in the nodes): here, in a vector by id.
struct Keys {
  std::vector<std::uint64_t> by_id;
  auto KeyOf() const {
    return [this](std::uint32_t id) { return by_id[id]; };
  }
  std::uint32_t Add(NodeTable& t, std::uint64_t key) {
    auto [slot, inserted] = t.Insert(key, KeyOf());
    if (!inserted) return *slot;
    *slot = static_cast<std::uint32_t>(by_id.size());
    by_id.push_back(key);
    return *slot;
  }
};

// A key whose folded value (key ^ key >> 32, what the table multiplies) is `f`.
std::uint64_t KeyWithFold(std::uint64_t f) {
  const std::uint64_t hi = f >> 32;
  return (hi << 32) | ((f ^ hi) & 0xFFFFFFFFULL);
}

// Two keys with the same 32-bit fingerprint: folds f and f + phi^-1 have products one apart.
std::pair<std::uint64_t, std::uint64_t> FingerprintTwins() {
  std::uint64_t inv = kPhi;  // Newton: inverse of an odd number mod 2^64
  for (int i = 0; i < 6; ++i) inv *= 2 - kPhi * inv;
  const std::uint64_t f = 12345;  // f * phi does not end in 0xFFFFFFFF, so no carry
  return {KeyWithFold(f), KeyWithFold(f + inv)};
}

TEST(NodeTableTest, KeysWithTheSameFingerprintAreToldApartByTheirNodes) {
  auto [a, b] = FingerprintTwins();
  ASSERT_NE(a, b);
  ASSERT_EQ(((a ^ (a >> 32)) * kPhi) >> 32, ((b ^ (b >> 32)) * kPhi) >> 32);
  NodeTable t;
  Keys k;
  const std::uint32_t ia = k.Add(t, a);
  const std::uint32_t ib = k.Add(t, b);
  EXPECT_NE(ia, ib);
  EXPECT_EQ(*t.Find(a, k.KeyOf()), ia);
  EXPECT_EQ(*t.Find(b, k.KeyOf()), ib);
  // Candidate returns the first fingerprint match; the caller confirms by key.
  EXPECT_EQ(t.Candidate(a), ia);
  EXPECT_TRUE(t.Erase(a, k.KeyOf()));
  EXPECT_EQ(t.Find(a, k.KeyOf()), nullptr);
  EXPECT_EQ(*t.Find(b, k.KeyOf()), ib);
  EXPECT_EQ(t.Candidate(b), ib);
}

TEST(NodeTableTest, KeyZeroIsAnOrdinaryKey) {
  NodeTable t;
  Keys k;
  const std::uint32_t id = k.Add(t, 0);
  EXPECT_EQ(*t.Find(0, k.KeyOf()), id);
  EXPECT_TRUE(t.Erase(0, k.KeyOf()));
  EXPECT_TRUE(t.empty());
}

TEST(NodeTableTest, CandidateOfAnAbsentKeyIsEmptyOrAnotherKeysNode) {
  NodeTable t;
  Keys k;
  EXPECT_EQ(t.Candidate(7), NodeTable::kEmpty);
  for (std::uint64_t key = 1; key <= 100; ++key) k.Add(t, key);
  const std::uint32_t c = t.Candidate(1000);
  EXPECT_TRUE(c == NodeTable::kEmpty || k.by_id[c] != 1000);
}

TEST(NodeTableTest, AgreesWithUnorderedMapUnderRandomInsertsAndErasesWhileGrowingAndShrinking) {
  std::mt19937_64 rng(11);
  NodeTable t;
  Keys k;
  std::unordered_map<std::uint64_t, std::uint32_t> ref;
  for (int step = 0; step < 300000; ++step) {
    // A key space that first grows then shrinks the table, small enough that probe runs
    // wrap and shift.
    const std::uint64_t space = step < 150000 ? 20000 : 600;
    const std::uint64_t key = (rng() % space) * 0x100000001ULL;
    if (rng() % 3 == 0 || step >= 150000) {
      ASSERT_EQ(t.Erase(key, k.KeyOf()), ref.erase(key) == 1) << "step " << step;
    } else {
      const std::uint32_t id = k.Add(t, key);
      auto [it, inserted] = ref.emplace(key, id);
      ASSERT_EQ(it->second, id) << "step " << step;
    }
    if (step % 1000 == 0) {
      ASSERT_EQ(t.size(), ref.size());
      for (const auto& [key2, id2] : ref) {
        const std::uint32_t* found = t.Find(key2, k.KeyOf());
        ASSERT_NE(found, nullptr);
        ASSERT_EQ(*found, id2);
      }
    }
  }
  std::size_t seen = 0;
  t.ForEach([&](std::uint32_t id) {
    ++seen;
    EXPECT_EQ(ref.at(k.by_id[id]), id);
  });
  EXPECT_EQ(seen, ref.size());
}

// Sorted probing's invariant (IndexFlatMap's, by fingerprint) holds after every operation
// of a random stream that grows and shrinks the table.
TEST(NodeTableTest, LayoutInvariantHoldsAfterEveryInsertAndErase) {
  std::mt19937_64 rng(3);
  NodeTable t;
  Keys k;
  std::unordered_map<std::uint64_t, std::uint32_t> ref;
  for (int step = 0; step < 30000; ++step) {
    const std::uint64_t space = step < 15000 ? 3000 : 200;
    const std::uint64_t key = (rng() % space) * 0x100000001ULL;
    if (rng() % 3 == 0 || step >= 15000) {
      ASSERT_EQ(t.Erase(key, k.KeyOf()), ref.erase(key) == 1) << "step " << step;
    } else {
      ref.emplace(key, k.Add(t, key));
    }
    ASSERT_TRUE(t.CheckLayout()) << "step " << step;
    ASSERT_EQ(t.size(), ref.size()) << "step " << step;
  }
  for (const auto& [key, id] : ref) {
    ASSERT_NE(t.Find(key, k.KeyOf()), nullptr);
    EXPECT_EQ(*t.Find(key, k.KeyOf()), id);
    EXPECT_EQ(t.Candidate(key), id);
  }
}

// Many keys with one fingerprint (one home, the table's last slot) outgrow the slack slots:
// the table rehashes with more slack and every key stays findable, erasable, and told
// apart through its node.
TEST(NodeTableTest, KeysWithOneFingerprintOutgrowTheSlackAndStayFindable) {
  std::uint64_t inv = kPhi;
  for (int i = 0; i < 6; ++i) inv *= 2 - kPhi * inv;
  std::vector<std::uint64_t> keys;
  for (std::uint64_t j = 0; j < 100; ++j) {
    keys.push_back(KeyWithFold((0xFFFFFFFFULL << 32) * inv + j * inv));
    ASSERT_EQ(((keys.back() ^ (keys.back() >> 32)) * kPhi) >> 32, 0xFFFFFFFFULL);
  }
  NodeTable t;
  Keys k;
  for (std::uint64_t key : keys) {
    k.Add(t, key);
    ASSERT_TRUE(t.CheckLayout());
  }
  EXPECT_EQ(t.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_NE(t.Find(keys[i], k.KeyOf()), nullptr);
    EXPECT_EQ(k.by_id[*t.Find(keys[i], k.KeyOf())], keys[i]);
  }
  for (std::size_t i = 0; i < keys.size(); i += 2) EXPECT_TRUE(t.Erase(keys[i], k.KeyOf()));
  ASSERT_TRUE(t.CheckLayout());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(t.Find(keys[i], k.KeyOf()) != nullptr, i % 2 == 1) << i;
  }
}

}  // namespace
}  // namespace kvroute::kv
