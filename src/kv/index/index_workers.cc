// KvIndexCore worker lifecycle and reporting: worker slots, resolving a worker's engine hashes,
// building the engine map of a worker whose hashes stopped being keys, purging and removing a
// worker, the stale flags, counters and stats, and ResetLocked. The invariants are listed in
// kv/README.md ("Index").
#include <algorithm>
#include <cassert>

#include "kv/index/index_core.h"

namespace kvroute::kv {
namespace {

template <typename T>
bool AnyRef(const std::array<T, kNumTiers>& ref) {
  return (ref[0] | ref[1] | ref[2] | ref[3]) != 0;
}

}  // namespace

std::uint32_t KvIndexCore::SlotFor(WorkerId worker) {
  auto [slot, inserted] = slot_of_worker_.Insert(worker, 0);
  if (!inserted) return *slot;
  if (!free_slots_.empty()) {
    *slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    *slot = static_cast<std::uint32_t>(workers_.size());
    assert(*slot <= HolderList::kMaxSlot);
    workers_.emplace_back();
    dirty_by_slot_.push_back(0);
  }
  WorkerState& w = workers_[*slot];
  w = WorkerState{};
  w.id = worker;
  w.live = true;
  return *slot;
}

const std::uint32_t* KvIndexCore::FindSlot(WorkerId worker) const {
  return slot_of_worker_.Find(worker);
}

std::uint32_t KvIndexCore::ResolveHash(std::uint32_t slot, EngineHash hash) const {
  const WorkerState& w = workers_[slot];
  if (!w.hashes_are_keys) {
    const EngineMap::Mapping mapped = w.engine.Find(hash, LoOf(slot));
    return mapped ? EngineMap::Node(*mapped.value) : kNoNode;
  }
  const std::uint32_t* id = node_of_key_.Find(hash, KeyOf());
  if (id == nullptr) return kNoNode;
  const std::optional<Entry> entry = ReadEntry(*id, slot);
  return entry.has_value() && AnyRef(entry->ref) ? *id : kNoNode;
}

std::vector<std::uint32_t> KvIndexCore::NodesHeldBy(std::uint32_t slot) const {
  std::vector<std::uint32_t> out;
  if (workers_[slot].held == 0) return out;
  out.reserve(workers_[slot].held);
  // Freed nodes have no holders, so they are skipped without a check.
  for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
    const std::optional<Entry> entry = ReadEntry(id, slot);
    if (entry.has_value() && AnyRef(entry->ref)) out.push_back(id);
  }
  return out;
}

// The map a worker would have had: each held node under its key, counted by its refs.
void KvIndexCore::MaterializeEngineMap(std::uint32_t slot) {
  WorkerState& w = workers_[slot];
  for (std::uint32_t node : NodesHeldBy(slot)) {
    // One hash (the key) per node: every mapping is its entry's primary one.
    const BlockKey key = nodes_[node].key;
    EntryRef entry = FindEntry(node, slot);
    const std::uint32_t refs = entry.ref(0) + entry.ref(1) + entry.ref(2) + entry.ref(3);
    const EngineMap::Mapping mapped = w.engine.Insert(key, LoOf(slot)).first;
    EngineMap::SetPrimary(mapped, node);
    entry.set_hash_lo(EngineMap::Lo(key));
    w.engine.SetRefs(key, mapped, refs);
  }
  w.hashes_are_keys = false;
}

void KvIndexCore::PurgeWorker(std::uint32_t slot) {
  WorkerState& w = workers_[slot];
  std::vector<std::uint32_t> held;
  if (w.hashes_are_keys) {
    held = NodesHeldBy(slot);
  } else {
    held.reserve(w.engine.size());
    w.engine.ForEachNode([&](std::uint32_t node) { held.push_back(node); });
  }
  w.engine.Clear();
  w.hashes_are_keys = true;  // nothing mapped: the next stores decide again
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  // Dropping every ref through the normal path also clears kids counters and placeholder
  // entries, and deletes nodes nobody needs any more. Nodes are only freed once every entry
  // in their subtree is gone, and each id in `held` keeps its entry until its own turn.
  for (std::uint32_t node : held) {
    for (int t = 0; t < kNumTiers; ++t) {
      EntryRef e = FindEntry(node, slot);
      if (!e) break;
      while (e && e.ref(t) > 0) {
        DropRef(slot, node, e, t);
        e = FindEntry(node, slot);
      }
    }
  }
  // Every hole had a held child, so dropping everything emptied the hole sets (kids counts
  // are exact); clearing them also gives back their arrays.
  for (int t = 0; t < kNumTiers; ++t) w.holes[t].Clear();
  RefreshDirty(slot);
}

void KvIndexCore::RemoveWorker(WorkerId worker) {
  std::unique_lock lock(mu_);
  const std::uint32_t* found = FindSlot(worker);
  if (found == nullptr) return;
  std::uint32_t slot = *found;
  PurgeWorker(slot);
  CompactTouched();
  slot_of_worker_.Erase(worker);
  workers_[slot] = WorkerState{};
  dirty_by_slot_[slot] = 0;
  free_slots_.push_back(slot);
}

void KvIndexCore::MarkStale(WorkerId worker) {
  std::unique_lock lock(mu_);
  workers_[SlotFor(worker)].stale = true;
}

void KvIndexCore::MarkSaltedTraffic(WorkerId worker) {
  {
    std::shared_lock lock(mu_);
    const std::uint32_t* slot = FindSlot(worker);
    if (slot != nullptr && workers_[*slot].salted_traffic) return;
  }
  std::unique_lock lock(mu_);
  workers_[SlotFor(worker)].salted_traffic = true;
}

void KvIndexCore::ClearStale(WorkerId worker) {
  std::unique_lock lock(mu_);
  if (const std::uint32_t* slot = FindSlot(worker)) workers_[*slot].stale = false;
}

IndexCounters KvIndexCore::counters() const {
  std::shared_lock lock(mu_);
  return counters_;
}

IndexStats KvIndexCore::stats() const {
  std::shared_lock lock(mu_);
  IndexStats s;
  s.workers = slot_of_worker_.size();
  s.nodes = node_of_key_.size();
  s.entries = num_entries_;
  for (const WorkerState& w : workers_) {
    s.engine_hashes += w.hashes_are_keys ? w.held : w.engine.size();
  }
  return s;
}

void KvIndexCore::ResetLocked() {
  node_of_key_.Clear();
  nodes_.clear();
  free_nodes_.clear();
  slot_of_worker_.Clear();
  workers_.clear();
  free_slots_.clear();
  dirty_by_slot_.clear();
  big_kids_.Clear();
  big_depth_.Clear();
  big_children_.Clear();
  touched_.clear();
  num_entries_ = 0;
}

}  // namespace kvroute::kv
