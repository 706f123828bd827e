// KvIndexCore::Restore and RestoreWorker: applying a parsed snapshot (IndexSnapshot,
// kv/index/index_snapshot.h) to the index, whole or one worker at a time.
//
// Restore replaces everything: every node of the image is created with its parent, then each
// worker's entries and engine map, then nodes nothing needs are dropped.
//
// RestoreWorker merges ONE worker's entries into a live index that other workers keep
// changing (a replica warming a worker that joined after its start). Its rules:
//   - the target worker must hold nothing yet and have applied no batch with a sequence
//     number (a merge adds to an empty worker and never overwrites what live events said
//     about it);
//   - every node the worker's entries need (the entries and all their ancestors) that already
//     exists in the index must have the parent the image gives it, all the way up to block 0
//     (a disagreement would be a key collision or a foreign image: refused);
//   - both are checked before anything changes, under the same exclusive lock as the change,
//     so a refused merge leaves the index exactly as it was.
// The entries then enter by the same steps as in Restore (AddRef builds kids, holes and lane
// counts; missing nodes are created parent first by GetOrCreateNode, which sets depth and
// child counts), so every invariant of kv/README.md "Index" holds afterwards as after live
// events. The worker's applied sequence comes along (v2 images): replayed batches up to it
// are then skipped, so a merged block counts the copies the sibling counted, not more. Merging every worker of an image into an empty index gives Restore's result, byte for
// byte in Dump (IndexDifferentialTest checks it, and that merges into a live index equal the
// reference model's union).
#include <string>
#include <unordered_map>

#include "kv/index/index_core.h"
#include "kv/index/index_snapshot.h"
#include "kv/index/index_snapshot_format.h"

namespace kvroute::kv {

using index_detail::kNoSnapshotNode;
using index_detail::SnapshotData;
using index_detail::SnapshotWorker;

void KvIndexCore::RestoreWorkerLocked(std::uint32_t slot, const SnapshotWorker& w,
                                      const std::function<std::uint32_t(std::uint32_t)>& node_of) {
  WorkerState& ws = workers_[slot];
  assert(ws.held == 0 && ws.engine.size() == 0);
  ws.stale = ws.stale || w.stale;
  // The image's blocks are those of the worker's batches up to this one: later replays of
  // them are skipped (ApplyBatch with seq) and its subscriber resumes after it.
  ws.applied_seq = w.applied_seq;
  // A worker whose every hash is its block's key is restored without a map, as live
  // operation would have kept it (Dump writes both forms alike).
  ws.hashes_are_keys = w.hashes_are_keys;
  for (const index_detail::SnapshotEntry& e : w.entries) {
    const std::uint32_t node = node_of(e.node);
    GetOrCreateEntry(node, slot);
    for (int t = 0; t < kNumTiers; ++t) {
      if (e.ref[t] == 0) continue;
      AddRef(slot, node, t);  // 0 -> 1 runs the holes and kids bookkeeping
      FindEntry(node, slot).set_ref(*this, t, e.ref[t]);
    }
  }
  if (ws.hashes_are_keys) return;
  // The mappings, after the entries that confirm them: the first hash of each node is its
  // entry's primary one, any other goes to the overflow map (as live operation would have put
  // them, up to which hash came first).
  std::unordered_map<std::uint32_t, bool> has_primary;
  EngineMap& engine = workers_[slot].engine;
  for (const index_detail::SnapshotHash& h : w.hashes) {
    const std::uint32_t node = node_of(h.node);
    EngineMap::Mapping mapped = engine.Insert(h.hash, LoOf(slot)).first;
    if (has_primary.emplace(node, true).second) {
      EngineMap::SetPrimary(mapped, node);
      FindEntry(node, slot).set_hash_lo(EngineMap::Lo(h.hash));
    } else {
      mapped = engine.MoveToExtra(h.hash, mapped, node);
    }
    engine.SetRefs(h.hash, mapped, h.refs);
  }
}

std::expected<void, std::string> KvIndexCore::Restore(std::string_view image) {
  // Parse everything before touching the index, so a bad image leaves it unchanged.
  auto parsed = IndexSnapshot::Parse(image, keyer_);
  if (!parsed) return std::unexpected(parsed.error());
  const SnapshotData& s = *parsed->data_;
  std::unique_lock lock(mu_);
  ResetLocked();
  // Node i of the index is node i of the image.
  const auto n = static_cast<std::uint32_t>(s.nodes.size());
  nodes_.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    nodes_[i].key = s.nodes[i].key;
    *node_of_key_.Insert(s.nodes[i].key, KeyOf()).first = i;
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    if (s.nodes[i].parent == kNoSnapshotNode) continue;
    nodes_[i].parent = s.nodes[i].parent;
    AddChild(s.nodes[i].parent);
  }
  // Depths: walk up to a node whose depth is known (or a root), then assign downwards.
  std::vector<std::uint8_t> known(n, 0);
  std::vector<std::uint32_t> chain;
  for (std::uint32_t i = 0; i < n; ++i) {
    chain.clear();
    std::uint32_t cur = i;
    while (!known[cur]) {
      chain.push_back(cur);
      if (nodes_[cur].parent == kNoNode) break;
      cur = nodes_[cur].parent;
    }
    std::uint32_t d = known[cur] ? DepthOf(cur) + 1 : 0;
    for (std::size_t k = chain.size(); k-- > 0;) {
      SetDepth(chain[k], d++);
      known[chain[k]] = 1;
    }
  }
  const auto same = [](std::uint32_t p) { return p; };
  for (const SnapshotWorker& w : s.workers) RestoreWorkerLocked(SlotFor(w.id), w, same);
  // Nodes that nothing needs (a hand-made image could list them) are dropped as live
  // operation would have.
  for (std::uint32_t i = 0; i < n; ++i) {
    if (nodes_[i].holders.empty() && nodes_[i].num_children == 0 &&
        node_of_key_.Find(nodes_[i].key, KeyOf()) != nullptr) {
      MaybeDeleteNode(i);
    }
  }
  CompactTouched();
  return {};
}

std::expected<std::size_t, std::string> KvIndexCore::RestoreWorker(const IndexSnapshot& snapshot,
                                                                   WorkerId from,
                                                                   WorkerId target) {
  using Err = std::unexpected<std::string>;
  const SnapshotData& s = *snapshot.data_;
  if (s.block_size != keyer_.block_size() || s.seed != keyer_.seed()) {
    return Err("snapshot: block size or key seed differs from this index's keyer");
  }
  const SnapshotWorker* w = s.FindWorker(from);
  if (w == nullptr) return Err("snapshot: no worker " + std::to_string(from));
  std::unique_lock lock(mu_);
  if (const std::uint32_t* slot = FindSlot(target); slot != nullptr) {
    if (workers_[*slot].held != 0) {
      return Err("worker " + std::to_string(target) +
                 " already holds blocks: a merge never overwrites live events");
    }
    if (workers_[*slot].applied_seq) {
      // Its subscriber has delivered batches: the image's sequence would misplace them.
      return Err("worker " + std::to_string(target) +
                 " already applied events with a sequence: a merge never overwrites live events");
    }
  }
  // Pass 1, nothing changes: the nodes the entries need (entries and ancestors, by image
  // position) with the live node of that key, or kNoNode where it is to be created; a live
  // node must have the image's parent.
  std::unordered_map<std::uint32_t, std::uint32_t> live;
  live.reserve(w->entries.size() * 2);
  for (const index_detail::SnapshotEntry& e : w->entries) {
    for (std::uint32_t p = e.node; p != kNoSnapshotNode && !live.contains(p);
         p = s.nodes[p].parent) {
      const std::uint32_t* id = node_of_key_.Find(s.nodes[p].key, KeyOf());
      const std::uint32_t found = id != nullptr ? *id : kNoNode;
      if (found != kNoNode) {
        const std::uint32_t lp = nodes_[found].parent;
        const std::uint32_t sp = s.nodes[p].parent;
        const bool agree = (lp == kNoNode) == (sp == kNoSnapshotNode) &&
                           (lp == kNoNode || nodes_[lp].key == s.nodes[sp].key);
        if (!agree) {
          return Err("snapshot: block " + std::to_string(s.nodes[p].key) +
                     " has another parent in this index");
        }
      }
      live.emplace(p, found);
    }
  }
  // Pass 2: the missing nodes, parent first, then the worker's entries and map.
  const std::uint32_t slot = SlotFor(target);
  std::vector<std::uint32_t> chain;
  for (const index_detail::SnapshotEntry& e : w->entries) {
    chain.clear();
    std::uint32_t p = e.node;
    while (p != kNoSnapshotNode && live.at(p) == kNoNode) {
      chain.push_back(p);
      p = s.nodes[p].parent;
    }
    std::uint32_t parent = p == kNoSnapshotNode ? kNoNode : live.at(p);
    for (std::size_t k = chain.size(); k-- > 0;) {
      parent = GetOrCreateNode(s.nodes[chain[k]].key, parent);
      live[chain[k]] = parent;
    }
  }
  RestoreWorkerLocked(slot, *w, [&live](std::uint32_t p) { return live.at(p); });
  CompactTouched();
  return w->entries.size();
}

}  // namespace kvroute::kv
