// KvIndexCore: the index itself — the compact node/entry layout, the write path and the read
// path — behind the short public KvIndex (kv/index/index.h), which forwards every call to it.
// Internal to kv/index/: only the index's own .cc files and its internals tests include this.
// The design, the proof that the jump search is exact and the memory layout are in
// kv/README.md "Index"; the entry representation is in kv/index/index_holders.h; the write path
// in index_apply.cc (events, reference counts), index_entries.cc (nodes, entries) and
// index_workers.cc (worker slots, purges, counters); the read path in index_lookup.cc;
// Dump and the image's parser in index_snapshot.cc, Restore/RestoreWorker in index_restore.cc.
// Thread safety: as KvIndex's (the lock is here).
#pragma once

#include <array>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "common/types.h"
#include "kv/index/index.h"
#include "kv/index/index_engine_map.h"
#include "kv/index/index_flat_map.h"
#include "kv/index/index_holders.h"
#include "kv/index/index_node_table.h"
#include "kv/keys/block_key.h"
#include "kv/kv_event.h"

namespace kvroute::kv {

class IndexSnapshot;
namespace index_detail {
struct SnapshotWorker;
}

class KvIndexCore {
 public:
  explicit KvIndexCore(const BlockKeyer& keyer);
  KvIndexCore(const KvIndexCore&) = delete;
  KvIndexCore& operator=(const KvIndexCore&) = delete;

  const BlockKeyer& keyer() const { return keyer_; }

  void ApplyBatch(WorkerId worker, const KvEventBatch& batch);
  void ApplyBatch(WorkerId worker, const KvEventBatch& batch, std::uint64_t seq);
  std::optional<std::uint64_t> AppliedSeq(WorkerId worker) const;
  void ApplyEvent(WorkerId worker, const KvEvent& event);

  std::vector<WorkerMatch> Lookup(std::span<const BlockKey> keys) const;

  void RemoveWorker(WorkerId worker);

  void MarkStale(WorkerId worker);
  void ClearStale(WorkerId worker);

  void MarkSaltedTraffic(WorkerId worker);

  IndexCounters counters() const;
  IndexStats stats() const;

  std::string Dump() const;
  std::expected<void, std::string> Restore(std::string_view image);
  std::expected<std::size_t, std::string> RestoreWorker(const IndexSnapshot& snapshot,
                                                        WorkerId from, WorkerId target);

 private:
  static constexpr std::uint32_t kNoNode = 0xFFFFFFFFu;

  // The entry representation (kv/index/index_holders.h).
  using Entry = index_detail::Entry;
  using BlockPool = index_detail::BlockPool;
  using HolderList = index_detail::HolderList;
  static std::uint32_t LanesOf(const Entry& e) { return index_detail::LanesOf(e); }
  // The write path's handle on one (node, worker) entry, in either form of its list. It
  // names the list and the worker rather than an address, so it stays valid while the
  // list's entries move (another worker's insert or erase, a spill, growth) until its own
  // entry is erased. A heap list's entry is found again on each access (a binary search for
  // the few lists with several holders). Writes that leave a list holding one heap entry
  // note it for CompactTouched. (A version that cached the heap position made the handle
  // 40 bytes, passed through memory: slower, measured.)
  class EntryRef {
   public:
    // No default member initializers: the handle is a default argument inside KvIndexCore.
    EntryRef() : list_(nullptr), slot_(0), at_(0) {}
    EntryRef(HolderList* list, std::uint32_t slot, std::uint32_t at = 0)
        : list_(list), slot_(slot), at_(at) {}
    explicit operator bool() const { return list_ != nullptr; }
    HolderList* list() const { return list_; }

    [[gnu::always_inline]] std::uint8_t ref(int t) const {
      const Entry* e = HeapEntry();
      return e != nullptr ? e->ref[t] : list_->InlineRef(t);
    }
    [[gnu::always_inline]] std::uint8_t kids(int t) const {
      const Entry* e = HeapEntry();
      return e != nullptr ? e->kids[t] : list_->InlineKids(t);
    }
    [[gnu::always_inline]] bool any_ref() const {
      const Entry* e = HeapEntry();
      if (e == nullptr) return list_->InlineAnyRef();
      return (e->ref[0] | e->ref[1] | e->ref[2] | e->ref[3]) != 0;
    }
    // Lanes this entry contributes to its node's lane count (index_detail::LanesOf).
    std::uint32_t lanes() const {
      return index_detail::kLanesOfHeldTiers[(ref(0) != 0) | (ref(1) != 0) << 1 |
                                             (ref(2) != 0) << 2 | (ref(3) != 0) << 3];
    }
    [[gnu::always_inline]] bool any_kids() const {
      const Entry* e = HeapEntry();
      if (e == nullptr) return list_->InlineAnyKids();
      return (e->kids[0] | e->kids[1] | e->kids[2] | e->kids[3]) != 0;
    }
    // Writes take the index: a value the packed form cannot hold spills the entry to one
    // of its pooled blocks.
    [[gnu::always_inline]] void set_ref(KvIndexCore& index, int t, std::uint8_t v) {
      if (Entry* e = Written(index)) {
        e->ref[t] = v;
      } else if (!list_->InlineSetRef(t, v)) {
        Spilled(index)->ref[t] = v;
      }
    }
    [[gnu::always_inline]] void set_kids(KvIndexCore& index, int t, std::uint8_t v) {
      if (Entry* e = Written(index)) {
        e->kids[t] = v;
      } else if (!list_->InlineSetKids(t, v)) {
        Spilled(index)->kids[t] = v;
      }
    }
    [[gnu::always_inline]] void set_hash_lo(std::uint32_t v) {
      if (Entry* e = HeapEntry()) {
        e->hash_lo = v;
      } else {
        list_->InlineSetHashLo(v);
      }
    }
    // After a ref changed the entry's lanes() by `delta` (an inline entry's lane count is
    // derived).
    [[gnu::always_inline]] void AddLanes(int delta) {
      if (!list_->is_inline()) list_->AddLanes(delta);
    }
    // Removes the entry from its list; the handle is invalid afterwards.
    void Erase(KvIndexCore& index);

   private:
    // The heap entry; nullptr when inline. Its last known position is checked first (still
    // inside the list and still this worker's slot: slots are unique in a list), so a list
    // with several holders is searched again only after it changed.
    [[gnu::always_inline]] Entry* HeapEntry() const {
      if ((list_->word() & 1) == 0) return nullptr;  // inline (never empty while named)
      Entry* e = list_->HeapEntryAt(at_, slot_);
      if (e == nullptr) [[unlikely]] {
        e = list_->HeapEntryOf(slot_);
        at_ = static_cast<std::uint32_t>(e - list_->heap_begin());
      }
      return e;
    }
    // The heap entry, noted for CompactTouched when it is the list's only one (a count that
    // fits the packed form again); nullptr when inline.
    [[gnu::always_inline]] Entry* Written(KvIndexCore& index) {
      Entry* e = HeapEntry();
      if (e != nullptr && list_->size() == 1) index.touched_.push_back(list_);
      return e;
    }
    Entry* Spilled(KvIndexCore& index) {
      list_->Spill(index.pool_);
      index.touched_.push_back(list_);
      return HeapEntry();
    }
    HolderList* list_;
    std::uint32_t slot_;
    mutable std::uint32_t at_;  // where the entry was last seen in a heap list
  };
  // One canonical block. Exists while some worker has an entry or it has child nodes, so the
  // node set is closed under parents (lookups rely on it). 24 bytes: depth and the child
  // count are 16 bits each, kBig16 meaning the value is in big_depth_ / big_children_ (a
  // chain deeper than 65,534 blocks, a block with more than 65,534 children).
  struct Node {
    BlockKey key = 0;
    std::uint32_t parent = kNoNode;
    std::uint16_t depth = 0;         // position in its chain: block 0 has depth 0
    std::uint16_t num_children = 0;  // child nodes
    HolderList holders;              // sorted by slot; also keeps the node's lane count
  };
  static_assert(sizeof(Node) == 24);
  static constexpr std::uint16_t kBig16 = 0xFFFF;
  // Nodes in fixed chunks: no 2x capacity slack at 10M nodes, and references stay valid as
  // the arena grows.
  class NodeArena {
   public:
    Node& operator[](std::uint32_t id) { return chunks_[id >> kShift][id & kMask]; }
    const Node& operator[](std::uint32_t id) const { return chunks_[id >> kShift][id & kMask]; }
    std::uint32_t size() const { return size_; }
    std::uint32_t emplace_back() {
      if ((size_ & kMask) == 0) chunks_.push_back(std::make_unique<Node[]>(kMask + 1));
      return size_++;
    }
    void resize(std::uint32_t n) {
      while (size_ < n) emplace_back();
    }
    void clear() {
      chunks_.clear();
      size_ = 0;
    }

   private:
    static constexpr std::uint32_t kShift = 12;
    static constexpr std::uint32_t kMask = (1u << kShift) - 1;
    std::vector<std::unique_ptr<Node[]>> chunks_;
    std::uint32_t size_ = 0;
  };
  struct WorkerState {
    WorkerId id = 0;
    bool live = false;
    bool stale = false;
    // True while every block this worker stored had an engine hash equal to its canonical
    // key (an engine hashing blocks as kvroute's keyer does): `engine` then stays empty and
    // a hash resolves through node_of_key_ and this worker's entry, its count being the
    // entry's refs. Exact either way; it saves the map's ~15 bytes per entry (12 / load).
    // The first differing hash builds the map (MaterializeEngineMap); a clear starts over.
    bool hashes_are_keys = true;
    bool salted_traffic = false;  // MarkSaltedTraffic was called
    // The engine sequence number of the last batch applied with one (ApplyBatch with seq, or
    // a snapshot's): set under the lock with the batch, kept by a clear, gone with the slot.
    std::optional<std::uint64_t> applied_seq;
    std::size_t held = 0;  // entries with some tier held (= hashes while hashes_are_keys)
    EngineMap engine;      // engine hash -> node, with a reference count per hash
    // Per tier, the worker's hole nodes: not held in that tier but with a child held in it.
    // Empty for every tier <=> the worker's held set is closed under parents in every tier.
    std::array<IndexFlatMap<std::uint8_t>, kNumTiers> holes;
  };
  static constexpr std::uint8_t kMaxRef = 0xFF;
  static constexpr std::uint8_t kBigKids = 0xFF;  // the count is in big_kids_

  // --- everything below is guarded by mu_ ---
  // Block keys of a call's stored runs, computed before the exclusive lock (PreKey in
  // index_apply.cc): per event, the parent key they chain from and where they start in `keys`.
  struct PreKeyed {
    enum State : std::uint8_t { kNone, kFromIndex, kKeyed };
    struct Run {
      State state = kNone;
      std::uint32_t offset = 0;
      BlockKey parent = 0;
    };
    std::vector<Run> runs;  // by event index
    std::vector<BlockKey> keys;
  };
  // `seq`: the batch's sequence number, if it came with one (then a seq at or below the
  // worker's applied one skips the batch).
  void ApplyEvents(WorkerId worker, std::span<const KvEvent> events, bool count_batch,
                   std::optional<std::uint64_t> seq = std::nullopt);
  // Takes mu_ shared (only if a parent must be resolved in the index); no lock held after.
  void PreKey(WorkerId worker, std::span<const KvEvent> events, PreKeyed* pre) const;

  std::uint32_t SlotFor(WorkerId worker);  // creates
  const std::uint32_t* FindSlot(WorkerId worker) const;
  void ApplyLocked(std::uint32_t slot, const KvEvent& event, const PreKeyed::Run* run,
                   std::span<const BlockKey> pre_keys);
  void ApplyStored(std::uint32_t slot, const BlockStored& e, const PreKeyed::Run* run,
                   std::span<const BlockKey> pre_keys);
  void ApplyRemoved(std::uint32_t slot, const BlockRemoved& e);
  void PurgeWorker(std::uint32_t slot);  // drops every entry of the worker, keeps the slot
  // The node `hash` names for this worker (a mapping exists while its count is positive),
  // or kNoNode.
  std::uint32_t ResolveHash(std::uint32_t slot, EngineHash hash) const;
  // Nodes where the worker holds some tier, found by scanning every node: what a worker
  // whose hashes are keys has instead of an engine map (O(nodes), so only on a clear, a
  // fallback to the map, or a snapshot).
  std::vector<std::uint32_t> NodesHeldBy(std::uint32_t slot) const;
  void MaterializeEngineMap(std::uint32_t slot);
  std::uint32_t GetOrCreateNode(BlockKey key, std::uint32_t parent);
  void MaybeDeleteNode(std::uint32_t node);
  // The write path's entries (an empty EntryRef when absent).
  EntryRef FindEntry(std::uint32_t node, std::uint32_t slot);
  EntryRef GetOrCreateEntry(std::uint32_t node, std::uint32_t slot);
  // Packs the lists the write path left with one heap entry that fits the packed form.
  // Every writer calls it before unlocking, so between calls every list is in its packed
  // form where it can be. (A window of 1,024 noted lists, kept while every write spilled,
  // saved nothing once the hot paths edited the packed word: measured.)
  void CompactTouched();
  // The read path's entries (either form, nothing moved).
  std::optional<Entry> ReadEntry(std::uint32_t node, std::uint32_t slot) const {
    return nodes_[node].holders.Find(slot);
  }
  // The confirmation half of `slot`'s primary engine-hash mappings (EngineMap).
  auto LoOf(std::uint32_t slot) const {
    return [this, slot](std::uint32_t node) { return nodes_[node].holders.HashLo(slot); };
  }
  // Depth and child count beyond 16 bits (Node).
  std::uint32_t DepthOf(std::uint32_t node) const {
    const std::uint16_t d = nodes_[node].depth;
    return d != kBig16 ? d : *big_depth_.Find(node);
  }
  void SetDepth(std::uint32_t node, std::uint32_t depth);
  void AddChild(std::uint32_t node) {
    if (nodes_[node].num_children < kBig16 - 1) {
      ++nodes_[node].num_children;
    } else {
      AddBigChild(node);
    }
  }
  void RemoveChild(std::uint32_t node) {
    if (nodes_[node].num_children != kBig16) {
      --nodes_[node].num_children;
    } else {
      RemoveBigChild(node);
    }
  }
  void AddBigChild(std::uint32_t node);
  void RemoveBigChild(std::uint32_t node);
  // The (node, slot) entry is passed in by callers that already found it: each search of a
  // node's holders saved is a measurable share of the apply cost.
  // `parent_entry`, when given, is (parent of node, slot)'s existing entry.
  void AddRef(std::uint32_t slot, std::uint32_t node, EntryRef entry, int tier,
              EntryRef parent_entry = {});
  // The general paths of AddRef, DropRef, ParentGainsKid, ParentLosesKid (heap lists, counts
  // the packed form cannot hold), out of line so the inline fast paths stay small.
  [[gnu::noinline]] void AddRefSlow(std::uint32_t slot, std::uint32_t node, EntryRef entry,
                                    int tier, EntryRef parent_entry);
  [[gnu::noinline]] void DropRefSlow(std::uint32_t slot, std::uint32_t node, EntryRef entry,
                                     int tier);
  [[gnu::noinline]] void ParentGainsKidSlow(std::uint32_t slot, std::uint32_t parent, int tier,
                                            EntryRef pe);
  [[gnu::noinline]] void ParentLosesKidSlow(std::uint32_t slot, std::uint32_t parent, int tier);
  void AddRef(std::uint32_t slot, std::uint32_t node, int tier) {
    AddRef(slot, node, FindEntry(node, slot), tier);
  }
  void DropRef(std::uint32_t slot, std::uint32_t node, EntryRef entry, int tier);
  void OnHeld(std::uint32_t slot, std::uint32_t node, EntryRef entry, int tier,
              EntryRef parent_entry);
  void OnReleased(std::uint32_t slot, std::uint32_t node, EntryRef entry, int tier);
  // The parent's halves of OnHeld and OnReleased: one more / one fewer child held in tier t
  // in the parent's entry (created / erased as a placeholder as needed).
  // Defined and called only in index_apply.cc (inline there: every store and removal).
  [[gnu::always_inline]] inline void ParentGainsKid(std::uint32_t slot, std::uint32_t node,
                                                    int tier, EntryRef parent_entry);
  [[gnu::always_inline]] inline void ParentLosesKid(std::uint32_t slot, std::uint32_t node,
                                                    int tier);
  // DropRef of an inline entry whose word `w` holds tier t; also index_apply.cc only.
  [[gnu::always_inline]] inline void DropInlineRef(std::uint32_t slot, std::uint32_t node,
                                                   HolderList& h, std::uint64_t w, int tier);
  void SetHole(std::uint32_t slot, std::uint32_t node, int tier, bool hole);
  // kids[tier] of (node, slot)'s entry + 1; returns true when it was 0. The byte's range is
  // handled inline (every store and removal of a chained block comes here).
  [[gnu::always_inline]] bool IncKids(std::uint32_t node, std::uint32_t slot, EntryRef e,
                                      int tier) {
    const std::uint8_t k = e.kids(tier);
    if (k < kBigKids - 1) {
      e.set_kids(*this, tier, static_cast<std::uint8_t>(k + 1));
      return k == 0;
    }
    IncBigKids(node, slot, e, tier);
    return false;
  }
  // kids[tier] - 1 (it must be > 0); returns true when it becomes 0.
  [[gnu::always_inline]] bool DecKids(std::uint32_t node, std::uint32_t slot, EntryRef e,
                                      int tier) {
    const std::uint8_t k = e.kids(tier);
    if (k != kBigKids) {
      e.set_kids(*this, tier, static_cast<std::uint8_t>(k - 1));
      return k == 1;
    }
    DecBigKids(node, slot, e, tier);
    return false;
  }
  void IncBigKids(std::uint32_t node, std::uint32_t slot, EntryRef e, int tier);
  void DecBigKids(std::uint32_t node, std::uint32_t slot, EntryRef e, int tier);
  static std::uint64_t BigKidsKey(std::uint32_t node, std::uint32_t slot) {
    return (std::uint64_t{node} << 32) | slot;
  }
  void RefreshDirty(std::uint32_t slot);
  void ResetLocked();
  // Restore's and RestoreWorker's common step (index_restore.cc): one worker's entries and
  // engine map into `slot`, which holds nothing; `node_of` maps an image node position to
  // its node here (created already, ancestors included).
  void RestoreWorkerLocked(std::uint32_t slot, const index_detail::SnapshotWorker& worker,
                           const std::function<std::uint32_t(std::uint32_t)>& node_of);
  // The node table's key accessor: a slot stores only a fingerprint and the node id.
  auto KeyOf() const {
    return [this](std::uint32_t id) { return nodes_[id].key; };
  }

  const BlockKeyer keyer_;
  const BlockKey plain_root_;  // keyer_.Root(): the parent of every block 0
  mutable std::shared_mutex mu_;
  BlockPool pool_;         // before nodes_: the holder lists' spare blocks
  NodeTable node_of_key_;  // BlockKey -> node id; keys are compared through nodes_
  NodeArena nodes_;
  std::vector<std::uint32_t> free_nodes_;
  IndexFlatMap<std::uint32_t> slot_of_worker_;
  std::vector<WorkerState> workers_;  // by slot; slots are reused after RemoveWorker
  std::vector<std::uint32_t> free_slots_;
  // By slot: non-zero when the worker has holes. Contiguous so a lookup
  // finds the few dirty workers with one short scan.
  std::vector<std::uint8_t> dirty_by_slot_;
  // Exact kids counts of the entries whose kids[t] == kBigKids, by BigKidsKey(node, slot);
  // only the tiers whose byte is kBigKids are meaningful. Counts cannot overflow 32 bits
  // (a node has fewer children than there are nodes, < 2^31).
  IndexFlatMap<std::array<std::uint32_t, kNumTiers>> big_kids_;
  // Depths >= kBig16 and child counts >= kBig16, by node (Node's 16-bit fields read kBig16).
  IndexFlatMap<std::uint32_t> big_depth_;
  IndexFlatMap<std::uint32_t> big_children_;
  // Holder lists the write path may have spilled since the last CompactTouched (the arena
  // never moves a node, and a freed node's list stays a valid, empty list).
  std::vector<HolderList*> touched_;
  std::size_t num_entries_ = 0;
  IndexCounters counters_;
  std::vector<BlockKey> scratch_keys_;
  std::vector<BlockExtraKeys> scratch_extra_;  // EventExtraKeys' scratch under the lock
};

}  // namespace kvroute::kv
