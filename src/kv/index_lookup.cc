// KvIndex read path: per-worker consecutive prefix depths for a chain of block keys.
//
// The search tracks "lanes": (worker, tier) pairs for the 4 tiers plus lane 4 = any tier.
// A lane is alive at position i when the worker holds keys[0..i-1] in it. The search gallops:
// probing keys[j], it asks whether every alive lane holds it; if so, every alive lane holds
// keys[i..j] and depths advance by j - i + 1 for one probe. When fewer lanes hold keys[j], a
// search finds the first position where some lane drops, and that position is examined
// exactly. Both phases resolve up to kFan positions per round with their cache misses
// overlapped (a gallop of several doublings at once, then a kFan-ary search): the cost is
// memory latency per round, not per probe. Why this is exact (kv/README.md "Index" has the
// long form):
//
//  * If a lane holds keys[j] but misses some keys[k], i <= k < j, take the largest such k:
//    keys[k] is not held but its child keys[k+1] is, so keys[k] is one of the worker's hole
//    nodes (tracked per tier by the write path). Holes of alive workers that lie on this
//    prompt (node depth d with keys[d] == node key) become barriers; the search never jumps
//    over a barrier and examines barrier positions exactly. Between barriers, "holds keys[j]"
//    implies "holds keys[i..j]", so the number of alive lanes holding keys[p] is
//    non-increasing in p and the binary search is valid.
//  * Counting alive lanes at keys[j] is O(1) for clean workers: a clean lane that holds
//    keys[j] holds all of keys[0..j], hence is alive, so the node's lane_count counts exactly
//    the alive clean lanes. Workers with holes (few) are corrected one by one.
//  * Lanes with too many holes to list are examined position by position, which is exact
//    by definition.
#include <algorithm>
#include <bit>

#include "kv/index.h"

namespace kvroute::kv {
namespace {

constexpr int kLanes = kNumTiers + 1;
constexpr std::uint8_t kAnyLane = 1u << kNumTiers;
// Above this many dirty workers, counting falls back to scanning a node's holders.
constexpr std::size_t kMaxDirtyForFastCount = 64;
// Above this many holes in one tier, a worker's lanes are examined position by position
// instead of listing barriers.
constexpr std::size_t kMaxHolesForBarriers = 256;
// Positions resolved together per search round (see `resolve` in Lookup).
constexpr int kFan = 8;

// Per-thread scratch indexed by worker slot, so a lookup allocates nothing in steady state
// and resets only what it touched.
struct LookupScratch {
  std::vector<std::uint8_t> alive;                       // lane mask per slot
  std::vector<std::array<std::uint32_t, kLanes>> depth;  // depth per slot and lane
  std::vector<std::uint32_t> stamp;                      // position generation per slot
  std::vector<std::uint8_t> held;                        // lanes held at stamped position
  std::vector<std::uint8_t> exact;                       // lanes examined one by one; 0
                                                         // between lookups
  std::vector<std::uint32_t> alive_list;                 // slots with alive lanes
  std::vector<std::uint32_t> touched;                    // slots reported
  std::vector<std::uint32_t> dirty;                      // slots with holes, index-wide
  std::vector<std::uint32_t> barriers;                   // positions examined exactly
  std::uint32_t generation = 0;

  void Prepare(std::size_t slots) {
    if (alive.size() < slots) {
      alive.resize(slots, 0);
      depth.resize(slots);
      stamp.resize(slots, 0);
      held.resize(slots, 0);
      exact.resize(slots, 0);
    }
    alive_list.clear();
    touched.clear();
    dirty.clear();
    barriers.clear();
  }
  std::uint32_t NextGeneration() {
    if (++generation == 0) {  // wrapped: old stamps could alias
      std::fill(stamp.begin(), stamp.end(), 0);
      generation = 1;
    }
    return generation;
  }
};

// Lane masks have 5 bits; a table avoids libgcc's generic popcount (no -mpopcnt here).
constexpr std::array<std::uint8_t, 32> kLaneCount = [] {
  std::array<std::uint8_t, 32> t{};
  for (int m = 0; m < 32; ++m)
    t[m] = static_cast<std::uint8_t>(std::popcount(static_cast<unsigned>(m)));
  return t;
}();
inline int Lanes(std::uint8_t mask) { return kLaneCount[mask & 31]; }

template <typename EntryT>
std::uint8_t HeldLanes(const EntryT& e) {
  std::uint8_t m = 0;
  for (int t = 0; t < kNumTiers; ++t) m |= static_cast<std::uint8_t>((e.ref[t] != 0) << t);
  return m != 0 ? static_cast<std::uint8_t>(m | kAnyLane) : 0;
}

}  // namespace

std::vector<WorkerMatch> KvIndex::Lookup(std::span<const BlockKey> keys) const {
  std::vector<WorkerMatch> out;
  if (keys.empty()) return out;
  std::shared_lock lock(mu_);
  thread_local LookupScratch s;
  s.Prepare(workers_.size());
  const std::size_t n = keys.size();

  auto node_at = [&](std::size_t pos) -> const Node* {
    const std::uint32_t* id = node_of_key_.Find(keys[pos], KeyOf());
    return id == nullptr ? nullptr : &nodes_[*id];
  };

  const Node* first = node_at(0);
  if (first == nullptr) return out;
  std::int64_t alive_lanes = 0;  // popcount of all alive masks
  std::int64_t exact_lanes = 0;  // alive lanes examined one position at a time
  for (const Entry& e : first->holders) {
    const std::uint8_t m = HeldLanes(e);
    if (m == 0) continue;
    s.alive[e.slot] = m;
    s.depth[e.slot].fill(0);
    s.alive_list.push_back(e.slot);
    s.touched.push_back(e.slot);
    alive_lanes += Lanes(m);
  }
  // Dirty workers matter only through their holes on this prompt: a (worker, tier) with no
  // hole at any keys[k] holds a prefix of the prompt (if it held keys[j] but not some earlier
  // keys[k], the last such keys[k] would be a hole), so it behaves exactly like a clean one.
  // The others go to s.dirty (per-node correction) and their holes become barriers.
  for (std::uint32_t slot = 0; slot < dirty_by_slot_.size(); ++slot) {
    if (dirty_by_slot_[slot] == 0) continue;
    const WorkerState& w = workers_[slot];
    bool relevant = false;
    for (int t = 0; t < kNumTiers; ++t) {
      if (w.holes[t].size() > kMaxHolesForBarriers) {
        s.exact[slot] |= static_cast<std::uint8_t>((1u << t) | kAnyLane);
        relevant = true;
        continue;
      }
      w.holes[t].ForEach([&](std::uint64_t node, std::uint8_t) {
        const Node& h = nodes_[node];
        if (h.depth < n && keys[h.depth] == h.key) {
          s.barriers.push_back(h.depth);
          relevant = true;
        }
      });
    }
    if (relevant) s.dirty.push_back(slot);
    exact_lanes += Lanes(s.alive[slot] & s.exact[slot]);
  }
  std::sort(s.barriers.begin(), s.barriers.end());
  const bool fast_count = s.dirty.size() <= kMaxDirtyForFastCount;

  // Alive lanes holding `node` (the node at some prompt position; nullptr = absent).
  auto count_in = [&](const Node* node) -> std::int64_t {
    if (node == nullptr) return 0;
    std::int64_t c = 0;
    // O(1) plus a correction per dirty worker, unless scanning the holders is cheaper.
    if (fast_count && node->holders.size() > 4 * s.dirty.size()) {
      c = node->holders.lane_count();
      for (std::uint32_t slot : s.dirty) {
        const Entry* e = FindEntryIn(*node, slot);
        if (e == nullptr) continue;
        const std::uint8_t m = HeldLanes(*e);
        c += Lanes(m & s.alive[slot]) - Lanes(m);
      }
      return c;
    }
    for (const Entry& e : node->holders) {
      c += Lanes(s.alive[e.slot] & HeldLanes(e));
    }
    return c;
  };
  // Resolves several prompt positions to nodes at once. Each resolution is two dependent
  // cache misses (table slot, then node); requesting every slot before reading any, and
  // every node before counting any, overlaps the misses of one round instead of paying them
  // one position after another.
  const Node* resolved[kFan];
  auto resolve = [&](const std::size_t* pos, int m) {
    for (int k = 0; k < m; ++k) node_of_key_.Prefetch(keys[pos[k]]);
    for (int k = 0; k < m; ++k) {
      const std::uint32_t id = node_of_key_.Candidate(keys[pos[k]]);
      resolved[k] = id == NodeTable::kEmpty ? nullptr : &nodes_[id];
      if (resolved[k] != nullptr) __builtin_prefetch(resolved[k]);  // one line: 32-aligned
    }
    // Candidates were chosen by fingerprint; confirm the keys now that the nodes are on
    // their way (a mismatch is a fingerprint collision: search properly). Shared blocks keep
    // their lane count in the holders' heap block: request those too before counting.
    for (int k = 0; k < m; ++k) {
      if (resolved[k] == nullptr) continue;
      if (resolved[k]->key != keys[pos[k]]) resolved[k] = node_at(pos[k]);
      if (resolved[k] != nullptr) resolved[k]->holders.PrefetchHeap();
    }
  };
  // Examines keys[pos] (whose node is `node`) exactly: lanes that do not hold it stop at
  // depth pos.
  auto exact_step_at = [&](std::size_t pos, const Node* node) {
    const std::uint32_t gen = s.NextGeneration();
    if (node != nullptr) {
      for (const Entry& e : node->holders) {
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
        alive_lanes -= Lanes(drop);
        exact_lanes -= Lanes(drop & s.exact[slot]);
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
  auto exact_step = [&](std::size_t pos) { exact_step_at(pos, node_at(pos)); };

  std::size_t i = 1;  // alive lanes hold keys[0..i-1]
  std::size_t step = 1;
  std::size_t next_barrier = 0;  // index into s.barriers
  std::size_t pos[kFan];
  while (i < n && alive_lanes > 0) {
    if (exact_lanes > 0) {
      exact_step(i++);
      continue;
    }
    while (next_barrier < s.barriers.size() && s.barriers[next_barrier] < i) ++next_barrier;
    std::size_t limit = n - 1;
    if (next_barrier < s.barriers.size()) {
      if (s.barriers[next_barrier] == i) {
        exact_step(i++);
        step = 1;
        continue;
      }
      limit = s.barriers[next_barrier] - 1;
    }
    // Gallop, several steps per round: the positions a sequential gallop would probe if
    // every probe succeeded (i+step-1, then 2x, 4x, ... further), up to the barrier. The
    // first position where fewer lanes hold the block bounds the drop; counts are
    // non-increasing in position between barriers (file comment), so every earlier
    // position's success means all alive lanes hold everything up to it.
    int m = 0;
    for (std::size_t j = i - 1, g = step; m < kFan; g *= 2) {
      j = std::min(j + g, limit);
      pos[m++] = j;
      if (j == limit) break;
    }
    resolve(pos, m);
    int fail = 0;
    while (fail < m && count_in(resolved[fail]) == alive_lanes) ++fail;
    if (fail == m) {
      i = pos[m - 1] + 1;
      step <<= m;
      continue;
    }
    // The first drop lies in [lo, hi]: every alive lane holds keys[..lo-1], fewer hold
    // keys[hi]. Narrow it with kFan - 1 evenly spaced probes per round (a kFan-ary search).
    std::size_t lo = fail == 0 ? i : pos[fail - 1] + 1;
    std::size_t hi = pos[fail];
    const Node* hi_node = resolved[fail];
    while (lo < hi) {
      const std::size_t span = hi - lo;
      const int k = static_cast<int>(std::min<std::size_t>(kFan - 1, span));
      for (int q = 0; q < k; ++q) pos[q] = lo + (q + 1) * span / (k + 1);
      resolve(pos, k);
      int f = 0;
      while (f < k && count_in(resolved[f]) == alive_lanes) ++f;
      if (f < k) {
        hi = pos[f];
        hi_node = resolved[f];
      }
      lo = f == 0 ? lo : pos[f - 1] + 1;
    }
    exact_step_at(lo, hi_node);
    // Drop points tend to be spread evenly: resume with the last gap instead of from 1.
    step = std::max<std::size_t>(1, lo - i);
    i = lo + 1;
  }

  for (std::uint32_t slot : s.dirty) s.exact[slot] = 0;
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
