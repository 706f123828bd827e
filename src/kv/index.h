// KvIndex: the global KV block index. For each canonical block key (kv::BlockKey) it knows
// which workers hold the block, in which tiers (GPU, CPU, DISK, SHARED), fed by the engines'
// own KV events (kv::KvEventBatch, vLLM format). A lookup takes a prompt's chain of block keys
// and returns, for every worker holding block 0, its consecutive prefix depth per tier and
// over "any tier": matching stops at the worker's FIRST missing block (exact, never skipping
// holes). See kv/README.md section "Index" for the design, the proof that the jump search is
// exact, and the memory layout.
//
// Dual keys: engines name blocks by their own hashes (EngineHash), which kvroute cannot
// reproduce in general. Each worker keeps a map EngineHash -> canonical node, built from the
// token ids carried by BlockStored:
//   key_0 = keyer.Next(parent_key, tokens_of_block_0),
//   parent_key = key mapped from parent_block_hash, or keyer.Root(lora_name, "") for block 0.
// cache_salt is not visible in events, so blocks of salted requests are indexed as unsalted:
// a salted request cannot be matched precisely (kv/README.md). A worker whose engine hashes
// all equal these keys (an engine hashing as kvroute does) keeps no map: its hashes resolve
// through the node table, checked block by block, with an exact fallback to the map.
//
// Ownership: owns all index state; the BlockKeyer is copied in.
// Thread safety: every public method may be called from any thread concurrently. Writers
// (ApplyBatch, RemoveWorker, MarkStale, ClearStale, Restore) take an exclusive lock per call;
// readers (Lookup, counters, Dump) a shared one. ApplyBatch keys its token blocks before the
// exclusive lock (parents read under a shared one, checked again under the exclusive one), so
// batches of different workers applied from several threads key in parallel. The caller
// preserves per-worker event order (one subscriber thread per worker, or one for all).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <expected>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "common/types.h"
#include "kv/block_key.h"
#include "kv/index_engine_map.h"
#include "kv/index_flat_map.h"
#include "kv/index_node_table.h"
#include "kv/kv_event.h"

namespace kvroute::kv {

// One worker's match for a prompt.
struct WorkerMatch {
  WorkerId worker = 0;
  // Consecutive prefix depth in blocks, per tier (indexed by Tier).
  std::array<std::uint32_t, kNumTiers> depth{};
  // Consecutive prefix depth where each block may be in any tier (>= every depth[t]).
  std::uint32_t any_depth = 0;
  // The worker was marked stale (events lost or lagging): the scheduler should down-weight.
  bool stale = false;
  bool operator==(const WorkerMatch&) const = default;
};

// Why events were not applied. All monotonically increasing since construction.
struct IndexCounters {
  std::uint64_t batches = 0;
  std::uint64_t blocks_stored = 0;          // block stores applied (duplicates included)
  std::uint64_t blocks_removed = 0;         // block removals applied
  std::uint64_t clears = 0;                 // AllBlocksCleared applied
  std::uint64_t unknown_removals = 0;       // removal of a hash (or tier) the worker does not hold
  std::uint64_t unknown_parent_runs = 0;    // BlockStored whose parent hash was unknown: skipped
  std::uint64_t unknown_parent_blocks = 0;  // blocks in those runs
  std::uint64_t unknown_medium = 0;         // events whose medium is not a known tier: skipped
  std::uint64_t ignored_group = 0;          // events of a non-main KV cache group: skipped
  std::uint64_t block_size_mismatch = 0;    // BlockStored whose block_size != keyer's: skipped
  std::uint64_t malformed = 0;              // token count != blocks * block_size: skipped
  std::uint64_t hash_conflicts = 0;         // engine hash already mapped to a different key
  std::uint64_t ref_overflow = 0;           // > 255 copies of one block in one tier: ignored
  // Last block size seen in a BlockStored (0 = none yet); the parity check compares it with
  // the keyer's to report a mismatch instead of silently matching nothing.
  std::uint32_t last_event_block_size = 0;
};

// Sizes for memory reporting.
struct IndexStats {
  std::size_t workers = 0;
  std::size_t nodes = 0;          // distinct canonical blocks
  std::size_t entries = 0;        // (block, worker) pairs with at least one tier held
  std::size_t engine_hashes = 0;  // engine-hash mappings over all workers
};

class KvIndex {
 public:
  explicit KvIndex(const BlockKeyer& keyer);
  KvIndex(const KvIndex&) = delete;
  KvIndex& operator=(const KvIndex&) = delete;

  const BlockKeyer& keyer() const { return keyer_; }

  // Applies one batch of `worker`'s events in order. Creates the worker on first use.
  void ApplyBatch(WorkerId worker, const KvEventBatch& batch);
  void ApplyEvent(WorkerId worker, const KvEvent& event);

  // Each worker holding keys[0] in some tier, with its depths. Order unspecified. Workers not
  // listed have depth 0 everywhere.
  std::vector<WorkerMatch> Lookup(std::span<const BlockKey> keys) const;

  // Forgets everything about `worker` (it left, or it will be resynced from scratch).
  void RemoveWorker(WorkerId worker);

  // Staleness: the worker's entries stay, but lookups flag them until ClearStale, an
  // AllBlocksCleared from the worker, or RemoveWorker.
  void MarkStale(WorkerId worker);
  void ClearStale(WorkerId worker);

  IndexCounters counters() const;
  IndexStats stats() const;

  // Snapshot: a binary, versioned, checksummed image of the whole index (kv/README.md
  // "Snapshot format"); equal contents give byte-equal images. Restore replaces the contents
  // only if the image is intact and consistent; otherwise it returns an error and leaves the
  // index unchanged.
  std::string Dump() const;
  std::expected<void, std::string> Restore(std::string_view image);

 private:
  static constexpr std::uint32_t kNoNode = 0xFFFFFFFFu;

  // A (node, worker) pair. ref[t] counts stores minus removals of this block in tier t;
  // kids[t] counts this node's children that the worker holds in tier t. An entry with all
  // refs 0 but some kids > 0 marks a hole: a block the worker lacks under blocks it holds.
  // kids[t] == kBigKids means the count is >= 255 and kept exactly in big_kids_ (a block
  // with hundreds of continuations in one worker, e.g. a shared system prompt, is rare; one
  // byte per counter keeps the entry at 12 bytes).
  struct Entry {
    std::uint32_t slot;  // < 2^31: the top bit tags a HolderList's heap form
    std::array<std::uint8_t, kNumTiers> ref;
    std::array<std::uint8_t, kNumTiers> kids;
  };
  static_assert(sizeof(Entry) == 12);
  // Lanes an entry contributes to its node's lane count: one per tier held, plus the
  // any-tier lane if some tier is held.
  static std::uint32_t LanesOf(const Entry& e) {
    const std::uint32_t tiers =
        (e.ref[0] != 0) + (e.ref[1] != 0) + (e.ref[2] != 0) + (e.ref[3] != 0);
    return tiers + (tiers != 0);
  }
  // The entries of one node, sorted by slot, and the node's lane count (sum of LanesOf).
  // Most blocks are held by one worker, so one entry lives inline (no allocation) and its
  // lane count is computed from it; two or more go to a heap block whose header holds the
  // capacity and the lane count. 12 bytes, the size of one entry: the first word is the
  // inline entry's slot (< 2^31), kEmptyWord, or kHeapBit | size with the heap pointer in
  // the next 8 bytes. So a Node is 32 bytes.
  class HolderList {
   public:
    HolderList() = default;
    HolderList(const HolderList&) = delete;
    HolderList& operator=(const HolderList&) = delete;
    HolderList(HolderList&& o) noexcept { Take(o); }
    HolderList& operator=(HolderList&& o) noexcept {
      if (this != &o) {
        clear();
        Take(o);
      }
      return *this;
    }
    ~HolderList() { clear(); }

    Entry* begin() { return is_heap() ? heap()->entries() : &one_; }
    Entry* end() { return begin() + size(); }
    const Entry* begin() const { return const_cast<HolderList*>(this)->begin(); }
    const Entry* end() const { return begin() + size(); }
    std::size_t size() const {
      if (one_.slot < kHeapBit) return 1;
      return one_.slot == kEmptyWord ? 0 : one_.slot & kSizeMask;
    }
    bool empty() const { return one_.slot == kEmptyWord; }
    std::uint32_t lane_count() const {
      if (one_.slot < kHeapBit) return LanesOf(one_);
      return one_.slot == kEmptyWord ? 0 : heap()->lane_count;
    }
    // Hints the CPU to load the heap block (its header holds the lane count a lookup reads).
    void PrefetchHeap() const {
      if (is_heap()) __builtin_prefetch(heap());
    }
    // Hints the CPU to load every line of the entries (a lookup's exact step scans them).
    void PrefetchAll() const {
      if (!is_heap()) return;
      const char* p = reinterpret_cast<const char*>(heap());
      const char* end = reinterpret_cast<const char*>(heap()->entries() + size());
      for (; p < end; p += 64) __builtin_prefetch(p);
    }
    // Called after an entry's refs changed by `delta` lanes (inline: derived, nothing kept).
    void AddLanes(int delta) {
      if (is_heap()) heap()->lane_count += static_cast<std::uint32_t>(delta);
    }
    // Most blocks have one holder, so the inline cases are handled here without a call or a
    // search; the heap cases are in index_holders.cc.
    // First entry whose slot is >= `slot` (end() if none).
    Entry* LowerBound(std::uint32_t slot) {
      if (one_.slot < kHeapBit) return one_.slot < slot ? &one_ + 1 : &one_;
      if (one_.slot == kEmptyWord) return &one_;
      return LowerBoundHeap(slot);
    }
    const Entry* LowerBound(std::uint32_t slot) const {
      return const_cast<HolderList*>(this)->LowerBound(slot);
    }
    Entry* insert(Entry* pos, const Entry& e) {
      if (one_.slot == kEmptyWord) {
        one_ = e;
        return &one_;
      }
      return InsertSlow(pos, e);
    }
    void erase(Entry* pos) {
      if (one_.slot < kHeapBit) {  // inline: pos is the one entry
        one_.slot = kEmptyWord;
        return;
      }
      EraseHeap(pos);
    }
    void clear();

    // Worker slots must stay below this (the top bit of the first word tags the heap form).
    static constexpr std::uint32_t kMaxSlot = 0x7FFFFFFEu;

   private:
    static constexpr std::uint32_t kHeapBit = 0x80000000u;
    static constexpr std::uint32_t kSizeMask = 0x7FFFFFFFu;
    static constexpr std::uint32_t kEmptyWord = 0xFFFFFFFFu;
    struct Heap {
      std::uint32_t cap;
      std::uint32_t lane_count;
      Entry* entries() { return reinterpret_cast<Entry*>(this + 1); }
    };
    static_assert(sizeof(Heap) == 8);
    bool is_heap() const { return one_.slot >= kHeapBit && one_.slot != kEmptyWord; }
    Heap* heap() const {
      Heap* h;
      std::memcpy(&h, &one_.ref, sizeof(h));  // ref and kids: the 8 bytes after the tag
      return h;
    }
    void set_heap(Heap* h, std::uint32_t size) {
      one_.slot = kHeapBit | size;
      std::memcpy(&one_.ref, &h, sizeof(h));
    }
    void set_size(std::uint32_t size) { one_.slot = kHeapBit | size; }
    static Heap* NewHeap(std::uint32_t cap);
    Entry* LowerBoundHeap(std::uint32_t slot);
    Entry* InsertSlow(Entry* pos, const Entry& e);
    void EraseHeap(Entry* pos);
    void Take(HolderList& o);
    Entry one_{kEmptyWord, {}, {}};  // the entry, kEmptyWord, or heap tag + pointer
  };
  static_assert(sizeof(Entry::ref) + sizeof(Entry::kids) == sizeof(void*));
  static_assert(sizeof(HolderList) == 12);
  // One canonical block. Exists while some worker has an entry or it has child nodes, so the
  // node set is closed under parents (lookups rely on it). 32 bytes, 32-aligned: a lookup's
  // probe of a node is one cache line.
  struct alignas(32) Node {
    BlockKey key = 0;
    std::uint32_t parent = kNoNode;
    std::uint32_t num_children = 0;
    std::uint32_t depth = 0;  // position in its chain: block 0 has depth 0
    HolderList holders;       // sorted by slot; also keeps the node's lane count
  };
  static_assert(sizeof(Node) == 32);
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
  void ApplyEvents(WorkerId worker, std::span<const KvEvent> events, bool count_batch);
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
  Entry* FindEntry(std::uint32_t node, std::uint32_t slot);
  Entry& GetOrCreateEntry(std::uint32_t node, std::uint32_t slot);
  // The (node, slot) entry is passed in by callers that already found it: each search of a
  // node's holders saved is a measurable share of the apply cost.
  // `parent_entry`, when given, is (parent of node, slot)'s existing entry.
  void AddRef(std::uint32_t slot, std::uint32_t node, Entry& entry, int tier,
              Entry* parent_entry = nullptr);
  void AddRef(std::uint32_t slot, std::uint32_t node, int tier) {
    AddRef(slot, node, *FindEntry(node, slot), tier);
  }
  void DropRef(std::uint32_t slot, std::uint32_t node, Entry& entry, int tier);
  void OnHeld(std::uint32_t slot, std::uint32_t node, const Entry& entry, int tier,
              Entry* parent_entry);
  void OnReleased(std::uint32_t slot, std::uint32_t node, Entry& entry, int tier);
  const Entry* FindEntry(std::uint32_t node, std::uint32_t slot) const;
  static const Entry* FindEntryIn(const Node& node, std::uint32_t slot);
  void SetHole(std::uint32_t slot, std::uint32_t node, int tier, bool hole);
  // kids[tier] of (node, slot)'s entry + 1; returns true when it was 0. The byte's range is
  // handled inline (every store and removal of a chained block comes here).
  bool IncKids(std::uint32_t node, std::uint32_t slot, Entry& e, int tier) {
    if (e.kids[tier] < kBigKids - 1) return e.kids[tier]++ == 0;
    IncBigKids(node, slot, e, tier);
    return false;
  }
  // kids[tier] - 1 (it must be > 0); returns true when it becomes 0.
  bool DecKids(std::uint32_t node, std::uint32_t slot, Entry& e, int tier) {
    if (e.kids[tier] != kBigKids) return --e.kids[tier] == 0;
    DecBigKids(node, slot, e, tier);
    return false;
  }
  void IncBigKids(std::uint32_t node, std::uint32_t slot, Entry& e, int tier);
  void DecBigKids(std::uint32_t node, std::uint32_t slot, Entry& e, int tier);
  static std::uint64_t BigKidsKey(std::uint32_t node, std::uint32_t slot) {
    return (std::uint64_t{node} << 32) | slot;
  }
  void RefreshDirty(std::uint32_t slot);
  void ResetLocked();
  // The node table's key accessor: a slot stores only a fingerprint and the node id.
  auto KeyOf() const {
    return [this](std::uint32_t id) { return nodes_[id].key; };
  }

  const BlockKeyer keyer_;
  const BlockKey plain_root_;  // keyer_.Root("", ""): the parent of block 0 without LoRA
  mutable std::shared_mutex mu_;
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
  std::size_t num_entries_ = 0;
  IndexCounters counters_;
  std::vector<BlockKey> scratch_keys_;
};

}  // namespace kvroute::kv
