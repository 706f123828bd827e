// The entry representation of KvIndex (kv/index/index.h): Entry, one (node, worker) pair's counts;
// HolderList, a node's entries in one 8-byte word (one small entry packed inline, the rest in
// a heap block); BlockPool, the recycled heap blocks of the smallest capacity. Internal to the
// index (namespace index_detail): KvIndex names them as KvIndex::Entry, ::HolderList, ...
// The searches, inserts and erases of lists with several entries are in index_holders.cc.
//
// Ownership: a HolderList owns its heap block (freed by clear() or the destructor, or given
// back to a BlockPool); a BlockPool owns its spare blocks.
// Thread safety: none; KvIndex guards every list and its pool with its mutex (reads shared,
// writes exclusive).
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>

#include "kv/kv_event.h"

namespace kvroute::kv::index_detail {

// A (node, worker) pair. ref[t] counts stores minus removals of this block in tier t;
// kids[t] counts this node's children that the worker holds in tier t. An entry with all
// refs 0 but some kids > 0 marks a hole: a block the worker lacks under blocks it holds.
// kids[t] == KvIndex::kBigKids means the count is >= 255 and kept exactly in big_kids_ (a block
// with hundreds of continuations in one worker, e.g. a shared system prompt, is rare).
// hash_lo: the bottom half of the mix of the worker's primary engine hash for this block
// (EngineMap; meaningless while no primary mapping names this node).
struct Entry {
  std::uint32_t slot;
  std::array<std::uint8_t, kNumTiers> ref;
  std::array<std::uint8_t, kNumTiers> kids;
  std::uint32_t hash_lo;
};
static_assert(sizeof(Entry) == 16);
// Lanes an entry contributes to its node's lane count, by the set of tiers it holds (bit t:
// ref[t] > 0). Lane t means "tier t or a faster one holds the block" (kv/README.md "Index"),
// so an entry whose fastest tier is f is in lanes f..SHARED, plus the any-tier lane: 5 - f
// lanes, 0 if it holds no tier.
inline constexpr std::array<std::uint8_t, 16> kLanesOfHeldTiers = {0, 5, 4, 5, 3, 5, 4, 5,
                                                                   2, 5, 4, 5, 3, 5, 4, 5};
inline std::uint32_t LanesOf(const Entry& e) {
  const std::uint32_t tiers =
      (e.ref[0] != 0) | (e.ref[1] != 0) << 1 | (e.ref[2] != 0) << 2 | (e.ref[3] != 0) << 3;
  return kLanesOfHeldTiers[tiers];
}
// Spare heap blocks of HolderList's smallest capacity. An entry whose new value the packed
// form cannot hold is spilled to a heap block and CompactTouched packs it back later, so
// these blocks are recycled here instead of malloc and free per spill. Bounded (1,024
// spares). Guarded by KvIndex's mu_ (exclusive).
class BlockPool {
 public:
  BlockPool() = default;
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool() {
    for (std::size_t i = 0; i < count_; ++i) ::operator delete(spare_[i]);
  }
  void* Take() { return count_ == 0 ? nullptr : spare_[--count_]; }
  bool Give(void* b) {
    if (count_ == spare_.size()) return false;
    spare_[count_++] = b;
    return true;
  }

 private:
  std::array<void*, 1024> spare_;
  std::size_t count_ = 0;
};
// The entries of one node, sorted by slot, and the node's lane count (sum of LanesOf), in
// one 8-byte word. Most blocks are held by one worker with small counts, so that entry is
// packed inline: bit 0 clear, slot + 1 in bits 1-15 (so a packed entry is never 0), one
// bit per tier for ref[t] (0 or 1) in bits 16-19, kids[t] (0..7) in 3 bits each from bit
// 20, hash_lo in the top 32 bits; its lane count is computed from it. Anything else (two or more
// entries, or one that does not fit) lives in a heap block (header: capacity, size, lane count)
// whose address, tagged with bit 0, is the word. 0 is the empty list.
//
// Reading works on either form (begin()/end() yield Entry values, Find). The write path's
// common cases (a fresh block stored, a ref 0 <-> 1, a parent's kids count +-1 below 8, a
// removal) load the packed word once, edit it and store it (index_apply.cc); the rest goes
// through EntryRef: inline fields in the packed word, and an entry whose new value the
// packed form cannot hold (a second copy, an eighth child, a second holder) moved to a heap
// block first (Spill: a block from the BlockPool, no malloc). CompactTouched packs lists
// left with one small entry back.
class HolderList {
 public:
  HolderList() = default;
  HolderList(const HolderList&) = delete;
  HolderList& operator=(const HolderList&) = delete;
  HolderList(HolderList&& o) noexcept : word_(o.word_) { o.word_ = 0; }
  HolderList& operator=(HolderList&& o) noexcept {
    if (this != &o) {
      clear();
      word_ = o.word_;
      o.word_ = 0;
    }
    return *this;
  }
  ~HolderList() { clear(); }  // blocks go straight back to the heap

  // Read access, either form: entries by value.
  class Iterator {
   public:
    Iterator(std::uint64_t word, std::uint32_t i) : word_(word), i_(i) {}
    Entry operator*() const {
      return (word_ & kHeapTag) != 0 ? AsHeap(word_)->entries()[i_] : Unpack(word_);
    }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return i_ != o.i_; }

   private:
    std::uint64_t word_;
    std::uint32_t i_;
  };
  Iterator begin() const { return Iterator(word_, 0); }
  Iterator end() const { return Iterator(word_, static_cast<std::uint32_t>(size())); }
  std::size_t size() const {
    if (word_ == 0) return 0;
    return is_heap() ? heap()->size : 1;
  }
  bool empty() const { return word_ == 0; }
  std::uint32_t lane_count() const {
    if (word_ == 0) return 0;
    if (is_heap()) return heap()->lane_count;
    return kLanesOfHeldTiers[(word_ >> kRefShift) & 0xF];
  }
  // The entry of `slot`, if any.
  std::optional<Entry> Find(std::uint32_t slot) const {
    if (word_ == 0) return std::nullopt;
    if (!is_heap()) {
      if (inline_slot() != slot) return std::nullopt;
      return Unpack(word_);
    }
    const Entry* e = const_cast<HolderList*>(this)->LowerBound(slot);
    if (e == heap_end() || e->slot != slot) return std::nullopt;
    return *e;
  }
  // hash_lo of `slot`'s entry, which must exist (EngineMap's confirmation).
  std::uint32_t HashLo(std::uint32_t slot) const {
    if (!is_heap()) {
      assert(word_ != 0 && inline_slot() == slot);
      return static_cast<std::uint32_t>(word_ >> 32);
    }
    const Entry* e = const_cast<HolderList*>(this)->LowerBound(slot);
    assert(e != heap_end() && e->slot == slot);
    return e->hash_lo;
  }
  bool is_inline() const { return word_ != 0 && !is_heap(); }
  std::uint64_t word() const { return word_; }
  std::uint32_t inline_slot() const {
    return (static_cast<std::uint32_t>(word_ >> 1) & kSlotMask) - 1;
  }
  // The inline entry's fields (is_inline()).
  std::uint8_t InlineRef(int t) const {
    return static_cast<std::uint8_t>((word_ >> (kRefShift + t)) & 1);
  }
  std::uint8_t InlineKids(int t) const {
    return static_cast<std::uint8_t>((word_ >> (kKidsShift + 3 * t)) & 7);
  }
  bool InlineAnyRef() const { return ((word_ >> kRefShift) & 0xF) != 0; }
  bool InlineAnyKids() const { return ((word_ >> kKidsShift) & 0xFFF) != 0; }
  // Writes one of the inline entry's fields; false (nothing written) when the value does
  // not fit the packed form.
  bool InlineSetRef(int t, std::uint8_t v) {
    if (v > 1) return false;
    const int at = kRefShift + t;
    word_ = (word_ & ~(std::uint64_t{1} << at)) | (std::uint64_t{v} << at);
    return true;
  }
  bool InlineSetKids(int t, std::uint8_t v) {
    if (v > 7) return false;
    const int at = kKidsShift + 3 * t;
    word_ = (word_ & ~(std::uint64_t{7} << at)) | (std::uint64_t{v} << at);
    return true;
  }
  void InlineSetHashLo(std::uint32_t v) {
    word_ = (word_ & 0xFFFFFFFFu) | (std::uint64_t{v} << 32);
  }
  // Makes an empty list hold a fresh entry of `slot` (no refs, no kids) inline; false
  // when the slot is too large for the packed form.
  bool InlineCreate(std::uint32_t slot) {
    assert(word_ == 0);
    if (slot >= kSlotMask) return false;
    word_ = std::uint64_t{slot + 1} << 1;
    return true;
  }
  void InlineErase() {
    assert(is_inline());
    word_ = 0;
  }
  // The packed word's fields as masks, for the write path's one-load-one-store edits of an
  // inline entry (AddRef, DropRef and their parent halves in index_apply.cc): checking the
  // form once per edit instead of once per field read or write is ~1/4 of the apply's
  // instructions. A word with bit 0 clear is inline (or the empty list, 0).
  static constexpr std::uint64_t kTagBit = 1;
  static constexpr std::uint64_t kRefBits = std::uint64_t{0xF} << 16;
  static constexpr std::uint64_t kKidsBits = std::uint64_t{0xFFF} << 20;
  static constexpr std::uint64_t RefBit(int t) { return std::uint64_t{1} << (16 + t); }
  static constexpr std::uint64_t KidsOne(int t) { return std::uint64_t{1} << (20 + 3 * t); }
  static constexpr std::uint64_t KidsMask(int t) { return std::uint64_t{7} << (20 + 3 * t); }
  // Replaces an inline (or empty) list's word with another inline word or 0.
  void SetInlineWord(std::uint64_t w) {
    assert((word_ & kTagBit) == 0 && (w & kTagBit) == 0);
    word_ = w;
  }
  // Makes an empty list hold `slot`'s entry with ref[t] = 1, hash_lo `lo`, nothing else,
  // in one store; false when the slot is too large for the packed form.
  bool InlineCreateHeld(std::uint32_t slot, int t, std::uint32_t lo) {
    assert(word_ == 0);
    if (slot >= kSlotMask) return false;
    word_ = (std::uint64_t{lo} << 32) | (std::uint64_t{slot + 1} << 1) | RefBit(t);
    return true;
  }
  // The heap entry at position `at` if it is `slot`'s, else nullptr (also when inline).
  Entry* HeapEntryAt(std::uint32_t at, std::uint32_t slot) {
    assert(is_heap());
    Heap* h = heap();
    if (at >= h->size || h->entries()[at].slot != slot) return nullptr;
    return h->entries() + at;
  }
  // The heap entry of `slot`, which must be in the list; nullptr when it is the inline one.
  Entry* HeapEntryOf(std::uint32_t slot) {
    if (!is_heap()) return nullptr;
    Entry* e = LowerBound(slot);
    assert(e != heap_end() && e->slot == slot);
    return e;
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

  // Write access: the heap form (or the empty list). Calls that allocate or free take the
  // index's BlockPool.
  // Moves an inline entry to a heap block (no-op for the other forms).
  void Spill(BlockPool& pool) {
    if (!is_inline()) return;
    const Entry e = Unpack(word_);
    Heap* h = NewHeap(kSmallCap, &pool);
    h->entries()[0] = e;
    h->size = 1;
    h->lane_count = LanesOf(e);
    set_heap(h);
  }
  Entry* heap_begin() const { return is_heap() ? heap()->entries() : nullptr; }
  Entry* heap_end() { return is_heap() ? heap()->entries() + heap()->size : nullptr; }
  const Entry* heap_end() const { return const_cast<HolderList*>(this)->heap_end(); }
  // First entry whose slot is >= `slot` (heap_end() if none). Not inline.
  Entry* LowerBound(std::uint32_t slot) {
    assert(!is_inline());
    if (word_ == 0) return nullptr;
    Entry* d = heap()->entries();
    if (heap()->size == 1) return d->slot < slot ? d + 1 : d;  // most lists: one entry
    return LowerBoundSlow(slot);
  }
  // Inserts before `pos` (from LowerBound); the list becomes (or stays) a heap block.
  Entry* insert(Entry* pos, const Entry& e, BlockPool& pool);
  // Erases `pos`; the list stays a heap block while it has entries (Compact packs it).
  void erase(Entry* pos, BlockPool& pool);
  // Called after an entry's refs changed by `delta` lanes. Not inline.
  void AddLanes(int delta) {
    assert(is_heap());
    heap()->lane_count += static_cast<std::uint32_t>(delta);
  }
  // Packs a heap block holding one entry that fits back inline.
  void Compact(BlockPool& pool) {
    if (!is_heap()) return;
    Heap* h = heap();
    if (h->size != 1 || !FitsInline(h->entries()[0])) return;
    word_ = Pack(h->entries()[0]);
    FreeHeap(h, &pool);
  }
  void clear(BlockPool* pool = nullptr) {
    if (is_heap()) FreeHeap(heap(), pool);
    word_ = 0;
  }

  // Worker slots must stay below this (an inline entry's slot is 15 bits; larger slots
  // are stored in the heap form).
  static constexpr std::uint32_t kMaxSlot = 0x7FFFFFFEu;
  static bool FitsInline(const Entry& e) {
    std::uint32_t refs, kids;
    std::memcpy(&refs, e.ref.data(), 4);
    std::memcpy(&kids, e.kids.data(), 4);
    return e.slot < kSlotMask && (refs & 0xFEFEFEFEu) == 0 && (kids & 0xF8F8F8F8u) == 0;
  }

 private:
  static constexpr std::uint64_t kHeapTag = kTagBit;
  static constexpr std::uint32_t kSlotMask = 0x7FFF;
  static constexpr int kRefShift = 16;
  static constexpr int kKidsShift = 20;
  static_assert(kRefBits == std::uint64_t{0xF} << kRefShift && kKidsBits == std::uint64_t{0xFFF}
                                                                                << kKidsShift);
  struct alignas(16) Heap {
    std::uint32_t cap;
    std::uint32_t size;
    std::uint32_t lane_count;
    std::uint32_t unused;
    Entry* entries() { return reinterpret_cast<Entry*>(this + 1); }
  };
  static_assert(sizeof(Heap) == 16);
  static Heap* AsHeap(std::uint64_t word) {
    return reinterpret_cast<Heap*>(static_cast<std::uintptr_t>(word & ~kHeapTag));
  }
  // Branch-free: each tier's ref byte (0 or 1) to one bit, each kids byte (< 8) to 3 bits.
  static Entry Unpack(std::uint64_t w) {
    const auto lo = static_cast<std::uint32_t>(w);
    const std::uint32_t r = lo >> kRefShift;
    const std::uint32_t k = lo >> kKidsShift;
    const std::uint32_t refs = (r & 1) | ((r & 2) << 7) | ((r & 4) << 14) | ((r & 8) << 21);
    const std::uint32_t kids =
        (k & 7) | ((k & 0x38) << 5) | ((k & 0x1C0) << 10) | ((k & 0xE00) << 15);
    Entry e;
    e.slot = ((lo >> 1) & kSlotMask) - 1;
    std::memcpy(e.ref.data(), &refs, 4);
    std::memcpy(e.kids.data(), &kids, 4);
    e.hash_lo = static_cast<std::uint32_t>(w >> 32);
    return e;
  }
  static std::uint64_t Pack(const Entry& e) {
    std::uint32_t x, k;
    std::memcpy(&x, e.ref.data(), 4);
    std::memcpy(&k, e.kids.data(), 4);
    const std::uint32_t refs = (x & 1) | ((x >> 7) & 2) | ((x >> 14) & 4) | ((x >> 21) & 8);
    const std::uint32_t kids =
        (k & 7) | ((k >> 5) & 0x38) | ((k >> 10) & 0x1C0) | ((k >> 15) & 0xE00);
    return (std::uint64_t{e.hash_lo} << 32) | ((e.slot + 1) << 1) | (refs << kRefShift) |
           (kids << kKidsShift);
  }
  bool is_heap() const { return (word_ & kHeapTag) != 0; }
  Heap* heap() const { return AsHeap(word_); }
  void set_heap(Heap* h) { word_ = reinterpret_cast<std::uintptr_t>(h) | kHeapTag; }
  static constexpr std::uint32_t kSmallCap = 2;  // the pooled blocks' capacity
  static Heap* NewHeap(std::uint32_t cap, BlockPool* pool) {
    void* p = cap == kSmallCap && pool != nullptr ? pool->Take() : nullptr;
    if (p == nullptr) p = ::operator new(sizeof(Heap) + cap * sizeof(Entry));
    auto* h = static_cast<Heap*>(p);
    *h = Heap{cap, 0, 0, 0};
    return h;
  }
  static void FreeHeap(Heap* h, BlockPool* pool) {
    if (h->cap == kSmallCap && pool != nullptr && pool->Give(h)) return;
    ::operator delete(h);
  }
  Entry* LowerBoundSlow(std::uint32_t slot);
  std::uint64_t word_ = 0;  // 0, a packed entry, or a heap block's address | kHeapTag
};
static_assert(sizeof(HolderList) == 8);

}  // namespace kvroute::kv::index_detail
