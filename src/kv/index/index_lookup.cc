// KvIndexCore read path: per-worker consecutive prefix depths for a chain of block keys.
//
// The search tracks "lanes": (worker, tier) pairs for the 4 tiers plus lane 4 = any tier.
// Lane t holds a block when tier t OR A FASTER ONE holds it (GPU <= CPU <= DISK <= SHARED,
// common/tier.h), so a tier's depth counts the prefix that it and the faster tiers hold
// together: host copies exist only for blocks the GPU evicted, so a host tier's own run from
// block 0 is empty while it holds the blocks right after the GPU's prefix (kv/README.md
// "Index"). Lane 3 (SHARED or faster) then equals lane 4. A lane is alive at position i
// when the worker holds keys[0..i-1] in it. The search gallops:
// probing keys[j], it asks whether every alive lane holds it; if so, every alive lane holds
// keys[i..j] and depths advance by j - i + 1 for one probe. Where fewer lanes hold keys[j],
// the positions where some lane drops are searched for, all of a segment's drops in shared
// rounds (search_segment), and each drop position is then examined exactly, in order. A
// round resolves all its positions with their cache misses overlapped: the cost is memory
// latency per round, not per probe. Why this is exact (kv/README.md "Index" has the long
// form):
//
//  * If a lane holds keys[j] but misses some keys[k], i <= k < j, take the largest such k:
//    keys[k] is not held but its child keys[k+1] is, in some tier t of the lane, so keys[k]
//    is one of the worker's hole nodes in tier t (tracked per tier by the write path). Holes of
//    alive workers that lie on this prompt (node depth d with keys[d] == node key) become barriers;
//    the search never jumps over a barrier and examines barrier positions exactly. Between
//    barriers, "holds keys[j]" implies "holds keys[i..j]", so the number of alive lanes holding
//    keys[p] is non-increasing in p and the binary search is valid.
//  * Counting alive lanes at keys[j] is O(1) for clean workers: a clean lane that holds
//    keys[j] (in some tier t of the lane, clean too) holds all of keys[0..j], hence is alive, so
//    the node's lane_count counts exactly the alive clean lanes. Workers with holes (few) are
//    corrected one by one.
//  * Lanes with too many holes to list are examined position by position, which is exact
//    by definition.
#include <algorithm>
#include <bit>
#include <cstring>

#include "kv/index/index_core.h"

namespace kvroute::kv {
namespace {

constexpr int kLanes = kNumTiers + 1;
constexpr std::uint8_t kAnyLane = 1u << kNumTiers;
// Above this many dirty workers, counting falls back to scanning a node's holders.
constexpr std::size_t kMaxDirtyForFastCount = 64;
// Above this many holes in one tier, a worker's lanes are examined position by position
// instead of listing barriers.
constexpr std::size_t kMaxHolesForBarriers = 256;
// Most probes one open interval gets in a search round, and the round's target size (see
// `search_segment` in Lookup): rounds overlap their cache misses, so fewer, fuller rounds
// are cheaper as long as probes are not wasted on intervals with a single drop.
constexpr int kFan = 8;
constexpr std::size_t kRoundBudget = 48;

// A probed prompt position: its node (nullptr = absent) and the number of lanes alive at
// the start of the search segment that hold it (-1: not resolved yet).
struct Point {
  std::size_t pos;
  std::int64_t count;
  const void* node;  // a KvIndexCore::Node (private to the index): see node_of()
};

// A worker with holes on the prompt. Counting a node's alive lanes from its lane count
// needs a correction for such a worker only where it holds a lane that is not alive. It holds
// keys[p] in lane L without holding keys[0] in L only if some tier t <= L holds keys[p] and
// not keys[0], i.e. it has a hole in t on the prompt (the last missing block before p), so
// while its lanes are still `initial` (those at keys[0]) and all the lanes of its hole tiers
// are among them, its held lanes at any node are alive.
struct DirtyWorker {
  std::uint32_t slot;
  std::uint8_t initial;     // alive lanes at keys[0]
  std::uint8_t hole_lanes;  // the lanes of every tier with a hole on the prompt (or too many
                            // to list): tier t's are lanes t..SHARED (LanesOfTier)
};

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
  std::vector<DirtyWorker> dirty;                        // workers with holes on the prompt
  std::vector<std::uint32_t> corrected;                  // of those, counted one by one
  std::vector<std::uint32_t> barriers;                   // positions examined exactly
  std::vector<Point> points, next_points, round;         // search_segment's probes
  std::vector<std::size_t> fresh;                        // indices of a round's new points
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
    corrected.clear();
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

// The lanes a block held in tier t is in: t and every slower tier's (lane u = "tier u or a
// faster one"), without the any-tier lane.
constexpr std::uint8_t LanesOfTier(int t) { return static_cast<std::uint8_t>((0xFu << t) & 0xFu); }

// Lanes an entry holds: bit u for each tier u at or below its fastest tier with a ref, plus
// the any-tier lane (the same count as index_detail::LanesOf). Branch-free on the 4 ref bytes
// read as one word (exact steps call this for every holder of a node; GCC kept the per-tier
// loop as a loop): the high bit of each non-zero byte, gathered into bits 21..24 by one
// multiply (the partial products land on distinct bits, so no carries), then smeared upward.
template <typename EntryT>
std::uint8_t HeldLanes(const EntryT& e) {
  static_assert(sizeof(e.ref) == 4);
  std::uint32_t x;
  std::memcpy(&x, e.ref.data(), sizeof(x));
  const std::uint32_t nonzero = (((x & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | x) & 0x80808080u;
  std::uint32_t m = (((nonzero >> 7) * 0x204081u) >> 21) & 0xFu;
  m |= m << 1;
  m |= m << 2;
  m &= 0xFu;
  return static_cast<std::uint8_t>(m != 0 ? (m | kAnyLane) : 0);
}

}  // namespace

std::vector<WorkerMatch> KvIndexCore::Lookup(std::span<const BlockKey> keys) const {
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
  {
    // Raw pointers in locals, as in exact_step_at below (no reloads from thread-local
    // storage after each byte store).
    s.touched.resize(first->holders.size());
    std::uint32_t* const touched = s.touched.data();
    std::uint8_t* const alive = s.alive.data();
    std::array<std::uint32_t, kLanes>* const depth = s.depth.data();
    std::size_t count = 0;
    for (const Entry& e : first->holders) {
      const std::uint8_t m = HeldLanes(e);
      if (m == 0) continue;
      alive[e.slot] = m;
      depth[e.slot].fill(0);
      touched[count++] = e.slot;
      alive_lanes += Lanes(m);
    }
    s.touched.resize(count);
    s.alive_list.assign(s.touched.begin(), s.touched.end());
  }
  // Dirty workers matter only through their holes on this prompt: a (worker, tier) with no
  // hole at any keys[k] holds a prefix of the prompt (if it held keys[j] but not some earlier
  // keys[k], the last such keys[k] would be a hole), so it behaves exactly like a clean one.
  // The others go to s.dirty (per-node correction) and their holes become barriers.
  for (std::uint32_t slot = 0; slot < dirty_by_slot_.size(); ++slot) {
    if (dirty_by_slot_[slot] == 0) continue;
    const WorkerState& w = workers_[slot];
    std::uint8_t hole_lanes = 0;  // lanes of tiers with a hole on the prompt (or too many)
    for (int t = 0; t < kNumTiers; ++t) {
      if (w.holes[t].size() > kMaxHolesForBarriers) {
        // Unlisted holes of tier t may end any lane tier t is part of.
        s.exact[slot] |= static_cast<std::uint8_t>(LanesOfTier(t) | kAnyLane);
        hole_lanes |= LanesOfTier(t);
        continue;
      }
      w.holes[t].ForEach([&](std::uint64_t node, std::uint8_t) {
        const std::uint32_t d = DepthOf(static_cast<std::uint32_t>(node));
        if (d < n && keys[d] == nodes_[node].key) {
          s.barriers.push_back(d);
          hole_lanes |= LanesOfTier(t);
        }
      });
    }
    if (hole_lanes != 0) s.dirty.push_back(DirtyWorker{slot, s.alive[slot], hole_lanes});
    exact_lanes += Lanes(s.alive[slot] & s.exact[slot]);
  }
  std::sort(s.barriers.begin(), s.barriers.end());
  // The dirty workers whose lanes may differ from their held lanes at some node of the
  // search segment about to start; the others need no correction (see `DirtyWorker`).
  bool fast_count = true;
  auto select_corrected = [&] {
    s.corrected.clear();
    for (const DirtyWorker& d : s.dirty) {
      const bool untouched = s.alive[d.slot] == d.initial;
      if (!untouched || (d.hole_lanes & ~d.initial) != 0) s.corrected.push_back(d.slot);
    }
    fast_count = s.corrected.size() <= kMaxDirtyForFastCount;
  };

  // Alive lanes holding `node` (the node at some prompt position; nullptr = absent).
  auto count_in = [&](const Node* node) -> std::int64_t {
    if (node == nullptr) return 0;
    std::int64_t c = 0;
    // O(1) plus a correction per dirty worker, unless scanning the holders is cheaper.
    if (fast_count && node->holders.size() > 4 * s.corrected.size()) {
      c = node->holders.lane_count();
      for (std::uint32_t slot : s.corrected) {
        const std::optional<Entry> e = node->holders.Find(slot);
        if (!e.has_value()) continue;
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
  auto node_of = [](const Point& p) { return static_cast<const Node*>(p.node); };
  // Resolves prompt positions to nodes, all of one round together. Each resolution is two
  // dependent cache misses (table slot, then node); requesting every slot before reading
  // any, and every node before counting any, overlaps the misses of a round instead of
  // paying them one position after another.
  auto resolve = [&](std::vector<Point>& pts, std::size_t from) {
    const std::size_t m = pts.size();
    for (std::size_t k = from; k < m; ++k) node_of_key_.Prefetch(keys[pts[k].pos]);
    for (std::size_t k = from; k < m; ++k) {
      const std::uint32_t id = node_of_key_.Candidate(keys[pts[k].pos]);
      const Node* node = id == NodeTable::kEmpty ? nullptr : &nodes_[id];
      if (node != nullptr) {  // 24 bytes: one line, or two for 1 node in 4
        __builtin_prefetch(node);
        __builtin_prefetch(reinterpret_cast<const char*>(node) + sizeof(Node) - 1);
      }
      pts[k].node = node;
    }
    // Candidates were chosen by fingerprint; confirm the keys now that the nodes are on
    // their way (a mismatch is a fingerprint collision: search properly). Shared blocks keep
    // their lane count in the holders' heap block: request those too before counting.
    for (std::size_t k = from; k < m; ++k) {
      Point& p = pts[k];
      const Node* node = node_of(p);
      if (node == nullptr) continue;
      if (node->key != keys[p.pos]) p.node = node = node_at(p.pos);
      if (node != nullptr) node->holders.PrefetchHeap();
    }
    for (std::size_t k = from; k < m; ++k) pts[k].count = count_in(node_of(pts[k]));
  };
  // Examines keys[pos] (whose node is `node`) exactly: lanes that do not hold it stop at
  // depth pos.
  auto exact_step_at = [&](std::size_t pos, const Node* node) {
    const std::uint32_t gen = s.NextGeneration();
    // Raw pointers in locals: through the vectors of a thread_local, every byte store
    // (which may alias anything) made the compiler reload each vector's data pointer from
    // thread-local storage, per holder (perf).
    std::uint8_t* const alive = s.alive.data();
    std::uint32_t* const stamp = s.stamp.data();
    std::uint8_t* const held_at = s.held.data();
    if (node != nullptr) {
      for (const Entry& e : node->holders) {
        if (alive[e.slot] == 0) continue;
        stamp[e.slot] = gen;
        held_at[e.slot] = HeldLanes(e);
      }
    }
    std::uint32_t* const list = s.alive_list.data();
    std::size_t len = s.alive_list.size();
    const std::uint8_t* const exact = s.exact.data();
    std::array<std::uint32_t, kLanes>* const depth = s.depth.data();
    std::int64_t dropped = 0, dropped_exact = 0;
    for (std::size_t k = 0; k < len;) {
      const std::uint32_t slot = list[k];
      const std::uint8_t held = stamp[slot] == gen ? held_at[slot] : 0;
      const std::uint8_t drop = alive[slot] & static_cast<std::uint8_t>(~held);
      if (drop != 0) {
        for (int lane = 0; lane < kLanes; ++lane) {
          if (drop & (1u << lane)) depth[slot][lane] = static_cast<std::uint32_t>(pos);
        }
        dropped += Lanes(drop);
        dropped_exact += Lanes(drop & exact[slot]);
        alive[slot] &= held;
      }
      if (alive[slot] == 0) {
        list[k] = list[--len];
      } else {
        ++k;
      }
    }
    s.alive_list.resize(len);  // only shrinks
    alive_lanes -= dropped;
    exact_lanes -= dropped_exact;
  };
  auto exact_step = [&](std::size_t pos) { exact_step_at(pos, node_at(pos)); };

  // Finds every position of [i, limit] where some alive lane drops, then examines those
  // positions exactly, in order. Counts are taken against the lanes alive at i, so they are
  // non-increasing in position (file comment): an interval whose two ends have equal counts
  // has no drop inside, and one whose counts differ has at least one. The search keeps the
  // probed positions sorted and splits every interval with a drop in each round, all rounds'
  // probes resolved together: the cost is a few rounds of overlapped misses for the whole
  // segment, not a search per drop. A drop is bracketed when its interval has length 1.
  auto search_segment = [&](std::size_t i, std::size_t limit) {
    std::vector<Point>& pts = s.points;
    std::vector<Point>& next = s.next_points;
    pts.clear();
    pts.push_back(Point{i - 1, alive_lanes, nullptr});  // every alive lane holds keys[i-1]
    // Round 1 gallops: i, i+1, i+3, i+7, ... up to the limit, so a segment whose lanes all
    // drop early costs no probes far away.
    for (std::size_t g = 1;; g *= 2) {
      const std::size_t j = std::min(i - 1 + g, limit);
      pts.push_back(Point{j, 0, nullptr});
      if (j == limit) break;
    }
    resolve(pts, 1);
    for (;;) {
      std::size_t open = 0;
      for (std::size_t k = 1; k < pts.size(); ++k) {
        open += pts[k - 1].count > pts[k].count && pts[k].pos - pts[k - 1].pos > 1;
      }
      if (open == 0) break;
      // Many open intervals: fewer probes each (closer to binary search, fewer probes in
      // all); few: up to kFan - 1 each (fewer rounds). The round stays near kRoundBudget.
      const std::size_t per =
          std::clamp<std::size_t>(kRoundBudget / open, 1, static_cast<std::size_t>(kFan - 1));
      next.clear();
      next.push_back(pts[0]);
      for (std::size_t k = 1; k < pts.size(); ++k) {
        const Point& a = pts[k - 1];
        const std::size_t gap = pts[k].pos - a.pos;
        if (a.count > pts[k].count && gap > 1) {
          // Evenly spaced, one division per interval (not per probe: it showed in profiles).
          // With inc = gap / (c + 1) in 16.16 fixed point, inc >= 1.0 when c + 1 <= gap, so
          // floor(q * inc) is strictly increasing in q, >= 1, and <= q * gap / (c + 1) < gap:
          // the probes are distinct and strictly inside (a.pos, pts[k].pos).
          const std::size_t c = std::min(per, gap - 1);
          const std::size_t inc = (gap << 16) / (c + 1);
          for (std::size_t q = 1; q <= c; ++q) {
            Point& p = next.emplace_back();  // fields stored directly (see the output)
            p.pos = a.pos + ((q * inc) >> 16);
            p.count = -1;
            p.node = nullptr;
          }
        }
        next.push_back(pts[k]);
      }
      // Resolve only the new points (count -1), kept in place so `next` stays sorted.
      s.fresh.clear();
      for (std::size_t k = 0; k < next.size(); ++k) {
        if (next[k].count < 0) s.fresh.push_back(k);
      }
      s.round.clear();
      for (std::size_t k : s.fresh) s.round.push_back(next[k]);
      resolve(s.round, 0);
      for (std::size_t k = 0; k < s.fresh.size(); ++k) next[s.fresh[k]] = s.round[k];
      pts.swap(next);
    }
    // Every drop's holder list is read next: request them all first, so their misses
    // overlap instead of coming one drop after another.
    for (std::size_t k = 1; k < pts.size(); ++k) {
      if (pts[k - 1].count > pts[k].count && pts[k].node != nullptr) {
        node_of(pts[k])->holders.PrefetchAll();
      }
    }
    for (std::size_t k = 1; k < pts.size() && alive_lanes > 0; ++k) {
      if (pts[k - 1].count > pts[k].count) exact_step_at(pts[k].pos, node_of(pts[k]));
    }
  };

  std::size_t i = 1;             // alive lanes hold keys[0..i-1]
  std::size_t next_barrier = 0;  // index into s.barriers
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
        continue;
      }
      limit = s.barriers[next_barrier] - 1;
    }
    select_corrected();
    search_segment(i, limit);
    i = limit + 1;
  }

  for (const DirtyWorker& d : s.dirty) s.exact[d.slot] = 0;
  // Filled in place: a WorkerMatch built on the stack and copied was read back as 16-byte
  // words right after narrower stores (a store-forwarding stall per worker in perf).
  out.resize(s.touched.size());
  for (std::size_t k = 0; k < s.touched.size(); ++k) {
    // A worker's state is a few hundred bytes: its id and flag are one line per worker.
    if (k + 32 < s.touched.size()) __builtin_prefetch(&workers_[s.touched[k + 32]]);
    const std::uint32_t slot = s.touched[k];
    if (s.alive[slot] != 0) {
      for (int lane = 0; lane < kLanes; ++lane) {
        if (s.alive[slot] & (1u << lane)) s.depth[slot][lane] = static_cast<std::uint32_t>(i);
      }
      s.alive[slot] = 0;
    }
    WorkerMatch& m = out[k];
    m.worker = workers_[slot].id;
    for (int t = 0; t < kNumTiers; ++t) m.depth[t] = s.depth[slot][t];
    m.any_depth = s.depth[slot][kNumTiers];
    m.stale = workers_[slot].stale;
  }
  return out;
}

}  // namespace kvroute::kv
