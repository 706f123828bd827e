// KvIndexCore write path, nodes and entries: finding and creating a (node, worker) entry, the hole
// flags, the kids, depth and child counts beyond their packed widths, creating and deleting
// nodes, and packing spilled holder lists back (CompactTouched). Called by the event path
// (index_apply.cc), worker purges (index_workers.cc) and Restore (index_snapshot.cc), all
// under the exclusive lock. The invariants are listed in kv/README.md ("Index").
#include <cassert>

#include "kv/index/index_core.h"

namespace kvroute::kv {
void KvIndexCore::SetHole(std::uint32_t slot, std::uint32_t node, int tier, bool hole) {
  WorkerState& w = workers_[slot];
  if (hole) {
    w.holes[tier].Insert(node, 1);
  } else {
    w.holes[tier].Erase(node);
  }
  RefreshDirty(slot);
}

void KvIndexCore::RefreshDirty(std::uint32_t slot) {
  const WorkerState& w = workers_[slot];
  std::uint8_t dirty = 0;
  for (int t = 0; t < kNumTiers; ++t) dirty |= w.holes[t].empty() ? 0 : 1;
  dirty_by_slot_[slot] = dirty;
}

// The byte counts up to 254; from 255 on it reads kBigKids and the count is in big_kids_
// (the side entry exists exactly while some tier's byte is kBigKids). IncKids and DecKids
// (index.h) handle the byte's range and call these at its top.
void KvIndexCore::IncBigKids(std::uint32_t node, std::uint32_t slot, EntryRef e, int tier) {
  auto* big = big_kids_.Insert(BigKidsKey(node, slot), {}).first;
  if (e.kids(tier) == kBigKids - 1) {
    e.set_kids(*this, tier, kBigKids);
    (*big)[tier] = kBigKids;
  } else {
    ++(*big)[tier];
  }
}

void KvIndexCore::DecBigKids(std::uint32_t node, std::uint32_t slot, EntryRef e, int tier) {
  const std::uint64_t key = BigKidsKey(node, slot);
  auto* big = big_kids_.Find(key);
  assert(big != nullptr && (*big)[tier] >= kBigKids);
  if (--(*big)[tier] >= kBigKids) return;
  e.set_kids(*this, tier, kBigKids - 1);  // back in the byte's range
  (*big)[tier] = 0;
  bool any_big = false;
  for (int t = 0; t < kNumTiers; ++t) any_big |= e.kids(t) == kBigKids;
  if (!any_big) big_kids_.Erase(key);
}

KvIndexCore::EntryRef KvIndexCore::FindEntry(std::uint32_t node, std::uint32_t slot) {
  HolderList& h = nodes_[node].holders;
  if (h.is_inline()) return h.inline_slot() == slot ? EntryRef(&h, slot) : EntryRef();
  Entry* it = h.LowerBound(slot);
  if (it == h.heap_end() || it->slot != slot) return {};
  return EntryRef(&h, slot, static_cast<std::uint32_t>(it - h.heap_begin()));
}

KvIndexCore::EntryRef KvIndexCore::GetOrCreateEntry(std::uint32_t node, std::uint32_t slot) {
  HolderList& h = nodes_[node].holders;
  if (h.empty() && h.InlineCreate(slot)) return EntryRef(&h, slot);
  if (h.is_inline()) {
    if (h.inline_slot() == slot) return EntryRef(&h, slot);
    h.Spill(pool_);  // a second holder
  }
  Entry* it = h.LowerBound(slot);
  if (it == h.heap_end() || it->slot != slot) {
    it = h.insert(it, Entry{slot, {}, {}, 0}, pool_);
    touched_.push_back(&h);
  }
  return EntryRef(&h, slot, static_cast<std::uint32_t>(it - h.heap_begin()));
}

void KvIndexCore::CompactTouched() {
  for (HolderList* h : touched_) h->Compact(pool_);
  touched_.clear();
}

void KvIndexCore::SetDepth(std::uint32_t node, std::uint32_t depth) {
  Node& n = nodes_[node];
  if (n.depth == kBig16) big_depth_.Erase(node);
  if (depth < kBig16) {
    n.depth = static_cast<std::uint16_t>(depth);
  } else {
    n.depth = kBig16;
    *big_depth_.Insert(node, 0).first = depth;
  }
}

// The 16-bit count reads kBig16 exactly while the count is >= kBig16 and in big_children_.
void KvIndexCore::AddBigChild(std::uint32_t node) {
  Node& n = nodes_[node];
  if (n.num_children == kBig16) {
    ++*big_children_.Find(node);
  } else {  // kBig16 - 1 -> kBig16
    n.num_children = kBig16;
    big_children_.Insert(node, kBig16);
  }
}

void KvIndexCore::RemoveBigChild(std::uint32_t node) {
  std::uint32_t* count = big_children_.Find(node);
  if (--*count >= kBig16) return;
  nodes_[node].num_children = static_cast<std::uint16_t>(*count);
  big_children_.Erase(node);
}

std::uint32_t KvIndexCore::GetOrCreateNode(BlockKey key, std::uint32_t parent) {
  auto [id, inserted] = node_of_key_.Insert(key, KeyOf());
  if (!inserted) return *id;
  std::uint32_t node;
  if (!free_nodes_.empty()) {
    node = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    node = nodes_.emplace_back();
  }
  *id = node;
  Node& n = nodes_[node];
  n.key = key;
  n.parent = parent;
  n.num_children = 0;
  n.depth = 0;  // a freed node's big depth was erased when it was freed
  if (parent != kNoNode) {
    AddChild(parent);
    const std::uint16_t pd = nodes_[parent].depth;
    if (pd < kBig16 - 1) {
      n.depth = static_cast<std::uint16_t>(pd + 1);
    } else {
      SetDepth(node, DepthOf(parent) + 1);
    }
  }
  return node;
}

// Deletes empty childless nodes, walking up: keeps the node set closed under parents.
void KvIndexCore::MaybeDeleteNode(std::uint32_t node) {
  while (node != kNoNode) {
    Node& n = nodes_[node];
    if (!n.holders.empty() || n.num_children != 0) return;
    std::uint32_t parent = n.parent;
    node_of_key_.Erase(n.key, KeyOf());
    n.holders.clear(&pool_);
    n.parent = kNoNode;
    if (n.depth == kBig16) {
      big_depth_.Erase(node);
      n.depth = 0;
    }
    free_nodes_.push_back(node);
    if (parent != kNoNode) RemoveChild(parent);
    node = parent;
  }
}

}  // namespace kvroute::kv
