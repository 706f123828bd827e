// KvIndex read path: per-worker consecutive prefix depths for a chain of block keys.
//
// The search tracks "lanes": (worker, tier) pairs for the 4 tiers plus lane 4 = any tier.
// A lane is alive at position i when the worker holds keys[0..i-1] in it. Positions are
// examined one by one while some alive lane is dirty (its worker holds an orphan block in that
// tier); otherwise the search gallops: if every alive lane holds keys[j], each one holds
// keys[i..j] too (a clean lane's held set is closed under parents, and keys[j-1] is the parent
// of keys[j]), so depths advance by j - i + 1 at the cost of one probe. When a probe shows
// fewer holders, a binary search finds the first position where some lane drops out (the
// number of alive lanes holding keys[p] is non-increasing in p for clean lanes).
#include <algorithm>
#include <bit>

#include "kv/index.h"

namespace kvroute::kv {
namespace {

constexpr int kLanes = kNumTiers + 1;
constexpr std::uint8_t kAnyLane = 1u << kNumTiers;

// Per-thread scratch indexed by worker slot, so a lookup allocates nothing in steady state
// and resets only what it touched.
struct LookupScratch {
  std::vector<std::uint8_t> alive;                       // lane mask per slot
  std::vector<std::array<std::uint32_t, kLanes>> depth;  // depth per slot and lane
  std::vector<std::uint32_t> stamp;                      // position generation per slot
  std::vector<std::uint8_t> held;                        // lanes held at stamped position
  std::vector<std::uint8_t> dirty;                       // dirty lanes per slot
  std::vector<std::uint32_t> alive_list;                 // slots with alive lanes
  std::vector<std::uint32_t> touched;                    // slots reported
  std::uint32_t generation = 0;

  void Prepare(std::size_t slots) {
    if (alive.size() < slots) {
      alive.resize(slots, 0);
      depth.resize(slots);
      stamp.resize(slots, 0);
      held.resize(slots, 0);
      dirty.resize(slots, 0);
    }
    alive_list.clear();
    touched.clear();
  }
  std::uint32_t NextGeneration() {
    if (++generation == 0) {  // wrapped: old stamps could alias
      std::fill(stamp.begin(), stamp.end(), 0);
      generation = 1;
    }
    return generation;
  }
};

template <typename EntryT>
std::uint8_t HeldLanes(const EntryT& e) {
  std::uint8_t m = 0;
  for (int t = 0; t < kNumTiers; ++t) m |= static_cast<std::uint8_t>((e.ref[t] != 0) << t);
  return m != 0 ? static_cast<std::uint8_t>(m | kAnyLane) : 0;
}

}  // namespace

std::uint8_t KvIndex::DirtyMask(std::uint32_t slot) const {
  const WorkerState& w = workers_[slot];
  std::uint8_t m = 0;
  for (int t = 0; t < kNumTiers; ++t) {
    if (w.orphans[t] != 0 || w.untracked[t]) m |= static_cast<std::uint8_t>(1u << t);
  }
  // The union of parent-closed sets is parent-closed; otherwise scan "any" exactly too.
  return m != 0 ? static_cast<std::uint8_t>(m | kAnyLane) : 0;
}

std::vector<WorkerMatch> KvIndex::Lookup(std::span<const BlockKey> keys) const {
  std::vector<WorkerMatch> out;
  if (keys.empty()) return out;
  std::shared_lock lock(mu_);
  thread_local LookupScratch s;
  s.Prepare(workers_.size());

  auto node_at = [&](std::size_t pos) -> const Node* {
    const std::uint32_t* id = node_of_key_.Find(keys[pos]);
    return id == nullptr ? nullptr : &nodes_[*id];
  };

  const Node* first = node_at(0);
  if (first == nullptr) return out;
  std::int64_t alive_lanes = 0;  // popcount of all alive masks
  std::int64_t dirty_lanes = 0;  // alive lanes that are dirty
  for (const Entry& e : first->holders) {
    std::uint8_t m = HeldLanes(e);
    if (m == 0) continue;
    s.alive[e.slot] = m;
    s.dirty[e.slot] = DirtyMask(e.slot);
    s.depth[e.slot].fill(0);
    s.alive_list.push_back(e.slot);
    s.touched.push_back(e.slot);
    alive_lanes += std::popcount(m);
    dirty_lanes += std::popcount(static_cast<std::uint8_t>(m & s.dirty[e.slot]));
  }

  // Alive lanes holding keys[pos].
  auto count_at = [&](std::size_t pos) -> std::int64_t {
    const Node* n = node_at(pos);
    if (n == nullptr) return 0;
    std::int64_t c = 0;
    for (const Entry& e : n->holders) {
      c += std::popcount(static_cast<std::uint8_t>(s.alive[e.slot] & HeldLanes(e)));
    }
    return c;
  };
  // Examines keys[pos] exactly: lanes that do not hold it stop at depth pos.
  auto exact_step = [&](std::size_t pos) {
    const Node* n = node_at(pos);
    const std::uint32_t gen = s.NextGeneration();
    if (n != nullptr) {
      for (const Entry& e : n->holders) {
        if (s.alive[e.slot] == 0) continue;
        s.stamp[e.slot] = gen;
        s.held[e.slot] = HeldLanes(e);
      }
    }
    for (std::size_t k = 0; k < s.alive_list.size();) {
      const std::uint32_t slot = s.alive_list[k];
      const std::uint8_t held = s.stamp[slot] == gen ? s.held[slot] : 0;
      const std::uint8_t drop = s.alive[slot] & static_cast<std::uint8_t>(~held);
      if (drop != 0) {
        for (int lane = 0; lane < kLanes; ++lane) {
          if (drop & (1u << lane)) s.depth[slot][lane] = static_cast<std::uint32_t>(pos);
        }
        alive_lanes -= std::popcount(drop);
        dirty_lanes -= std::popcount(static_cast<std::uint8_t>(drop & s.dirty[slot]));
        s.alive[slot] &= held;
      }
      if (s.alive[slot] == 0) {
        s.alive_list[k] = s.alive_list.back();
        s.alive_list.pop_back();
      } else {
        ++k;
      }
    }
  };

  std::size_t i = 1;  // alive lanes hold keys[0..i-1]
  std::size_t step = 1;
  const std::size_t n = keys.size();
  while (i < n && alive_lanes > 0) {
    if (dirty_lanes > 0) {
      exact_step(i++);
      continue;
    }
    const std::size_t j = std::min(i + step - 1, n - 1);
    if (count_at(j) == alive_lanes) {
      i = j + 1;
      step *= 2;
      continue;
    }
    std::size_t lo = i, hi = j;  // count_at(hi) < alive_lanes; all hold keys[..lo-1]
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (count_at(mid) == alive_lanes) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    exact_step(lo);
    i = lo + 1;
    step = 1;
  }

  out.reserve(s.touched.size());
  for (std::uint32_t slot : s.touched) {
    if (s.alive[slot] != 0) {
      for (int lane = 0; lane < kLanes; ++lane) {
        if (s.alive[slot] & (1u << lane)) s.depth[slot][lane] = static_cast<std::uint32_t>(i);
      }
      s.alive[slot] = 0;
    }
    WorkerMatch m;
    m.worker = workers_[slot].id;
    for (int t = 0; t < kNumTiers; ++t) m.depth[t] = s.depth[slot][t];
    m.any_depth = s.depth[slot][kNumTiers];
    m.stale = workers_[slot].stale;
    out.push_back(m);
  }
  return out;
}

}  // namespace kvroute::kv
