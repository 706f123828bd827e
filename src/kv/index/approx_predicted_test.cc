#include "kv/index/approx_predicted.h"

#include <gtest/gtest.h>

#include <list>
#include <map>
#include <random>
#include <unordered_map>

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

// The list-and-map implementation the flat one replaced, kept as the reference model: same
// LRU, expiry and holder-order rules, written for clarity.
class ReferencePredicted {
 public:
  explicit ReferencePredicted(PredictedOptions o) : o_(o) {}
  void SetCapacity(WorkerId worker, std::size_t blocks) {
    W& w = Get(worker);
    w.capacity = blocks;
    while (w.lru.size() > w.capacity) EvictBack(worker, w);
  }
  void Record(WorkerId worker, std::span<const BlockKey> keys, Nanos now) {
    W& w = Get(worker);
    while (!w.lru.empty() && w.lru.back().second <= now) EvictBack(worker, w);
    if (w.capacity == 0) return;
    for (std::size_t i = std::min(keys.size(), w.capacity); i-- > 0;) {
      if (auto f = w.where.find(keys[i]); f != w.where.end()) {
        f->second->second = now + o_.ttl;
        w.lru.splice(w.lru.begin(), w.lru, f->second);
        continue;
      }
      w.lru.emplace_front(keys[i], now + o_.ttl);
      w.where.emplace(keys[i], w.lru.begin());
      holders_[keys[i]].push_back(worker);
      if (w.lru.size() > w.capacity) EvictBack(worker, w);
    }
  }
  std::vector<PredictedMatch> Lookup(std::span<const BlockKey> keys, Nanos now) const {
    std::vector<PredictedMatch> out;
    if (keys.empty()) return out;
    auto h = holders_.find(keys[0]);
    if (h == holders_.end()) return out;
    for (WorkerId worker : h->second) {
      const W& w = workers_.at(worker);
      std::uint32_t depth = 0;
      while (depth < keys.size()) {
        auto it = w.where.find(keys[depth]);
        if (it == w.where.end() || it->second->second <= now) break;
        ++depth;
      }
      if (depth > 0) out.push_back({worker, depth});
    }
    return out;
  }
  void RemoveWorker(WorkerId worker) {
    auto it = workers_.find(worker);
    if (it == workers_.end()) return;
    while (!it->second.lru.empty()) EvictBack(worker, it->second);
    workers_.erase(it);
  }
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& [id, w] : workers_) n += w.lru.size();
    return n;
  }

 private:
  using Item = std::pair<BlockKey, Nanos>;
  struct W {
    std::size_t capacity = 0;
    std::list<Item> lru;
    std::unordered_map<BlockKey, std::list<Item>::iterator> where;
  };
  W& Get(WorkerId worker) {
    auto [it, inserted] = workers_.try_emplace(worker);
    if (inserted) it->second.capacity = o_.default_capacity_blocks;
    return it->second;
  }
  void EvictBack(WorkerId worker, W& w) {
    const BlockKey key = w.lru.back().first;
    w.where.erase(key);
    w.lru.pop_back();
    auto h = holders_.find(key);
    std::erase(h->second, worker);
    if (h->second.empty()) holders_.erase(h);
  }
  PredictedOptions o_;
  std::map<WorkerId, W> workers_;
  std::unordered_map<BlockKey, std::vector<WorkerId>> holders_;
};

// Seeded random operations on both: every lookup must give the same matches in the same
// order, and the sizes must agree. Small key and worker ranges force shared prefixes,
// refreshes, evictions at capacity, expiries, table growth and backward-shift deletions.
TEST(PredictedBlocksTest, FlatLayoutMatchesTheReferenceModel) {
  const PredictedOptions o{.ttl = seconds(3), .default_capacity_blocks = 40};
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    PredictedBlocks flat(o);
    ReferencePredicted ref(o);
    std::mt19937_64 rng(seed);
    Nanos now{0};
    std::vector<BlockKey> keys;
    for (int op = 0; op < 4000; ++op) {
      now += std::chrono::milliseconds(rng() % 200);
      const auto worker = static_cast<WorkerId>(rng() % 6);
      // A prompt: a shared head chosen among a few, then a private tail.
      keys.clear();
      const std::size_t head = rng() % 4;
      const std::size_t len = 1 + rng() % 30;
      for (std::size_t i = 0; i < len; ++i) {
        keys.push_back(i < 5 ? head * 100 + i : 1000 + rng() % 300);
      }
      const std::uint64_t what = rng() % 100;
      if (what < 55) {
        flat.Record(worker, keys, now);
        ref.Record(worker, keys, now);
      } else if (what < 95) {
        ASSERT_EQ(flat.Lookup(keys, now), ref.Lookup(keys, now)) << "seed " << seed << " op " << op;
      } else if (what < 98) {
        const std::size_t cap = rng() % 60;
        flat.SetCapacity(worker, cap);
        ref.SetCapacity(worker, cap);
      } else {
        flat.RemoveWorker(worker);
        ref.RemoveWorker(worker);
      }
      ASSERT_EQ(flat.size(), ref.size()) << "seed " << seed << " op " << op;
    }
  }
}

}  // namespace
}  // namespace kvroute::kv
