// NodeTable: the KV block index's BlockKey -> node id table (kv/index/index.h). Open addressing
// with sorted linear probing (Robin Hood with monotone homes, no wrap; see IndexFlatMap),
// but a slot is 8 bytes: a 32-bit fingerprint of the key and the 32-bit node id. The key
// itself lives in the node, so a probe whose fingerprint matches is confirmed by comparing
// the node's key (the reader reads that node next anyway). IndexFlatMap<u32> spent 12 bytes
// per slot on the same job; at ~0.65 load that was ~6 bytes per (block, worker) entry saved
// for unshared blocks.
//
// The fingerprint is the top half of a multiplicative hash and the home slot is the
// fingerprint scaled onto the capacity (TableHome; any capacity, grown by 1.25x at load
// 0.85 as IndexFlatMap), so the home of a stored element is known from its fingerprint alone:
// growing and deleting never read a node. Runs are sorted by fingerprint, so a miss stops at
// the first larger fingerprint and an erase stops at the first element at its home. An
// empty slot has fingerprint 0xFFFFFFFF (and id kEmpty), so "fingerprint < mine" alone
// skips the smaller ones and stops at an empty slot.
//
// Every key-comparing call takes `key_of(id) -> BlockKey` (the owner's node array).
//
// Ownership: owns its slot array. Thread safety: none; the owner (KvIndex) serializes
// access.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kv/index/index_flat_map.h"

namespace kvroute::kv {

class NodeTable {
 public:
  static constexpr std::uint32_t kEmpty = 0xFFFFFFFFu;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t capacity() const { return capacity_; }
  std::size_t capacity_bytes() const { return length_ * sizeof(Slot); }

  template <typename KeyOf>
  const std::uint32_t* Find(std::uint64_t key, const KeyOf& key_of) const {
    const std::size_t i = IndexOf(key, key_of);
    return i == kNotFound ? nullptr : &slots_[i].id;
  }
  template <typename KeyOf>
  std::uint32_t* Find(std::uint64_t key, const KeyOf& key_of) {
    const std::size_t i = IndexOf(key, key_of);
    return i == kNotFound ? nullptr : &slots_[i].id;
  }

  // The id of the first slot on `key`'s probe path whose fingerprint matches, or kEmpty.
  // Reads no node, so a caller resolving several keys can request all their nodes before
  // reading any; it must then confirm key_of(id) == key and, only if that fails (a
  // fingerprint collision, ~probes / 2^32), call Find.
  std::uint32_t Candidate(std::uint64_t key) const {
    if (capacity_ == 0) return kEmpty;
    const std::uint32_t fp = Fingerprint(key);
    std::size_t i = TableHome(fp, capacity_);
    while (slots_[i].fp < fp) ++i;
    return slots_[i].fp == fp ? slots_[i].id : kEmpty;
  }

  // Hints the CPU to load `key`'s home slot.
  void Prefetch(std::uint64_t key) const {
    if (capacity_ != 0) __builtin_prefetch(&slots_[TableHome(Fingerprint(key), capacity_)]);
  }

  // Finds `key` or claims a slot for it (second = true). A claimed slot's id must be set
  // through the returned pointer before any other call. Inserting moves other slots:
  // pointers from earlier calls are invalid afterwards. Always inlined (IndexFlatMap::Insert).
  template <typename KeyOf>
  [[gnu::always_inline]] std::pair<std::uint32_t*, bool> Insert(std::uint64_t key,
                                                                const KeyOf& key_of) {
    if (TableMustGrow(size_ + 1, capacity_)) Rehash(TableGrownCapacity(capacity_));
    const std::uint32_t fp = Fingerprint(key);
    std::size_t i = TableHome(fp, capacity_);
    while (slots_[i].fp < fp) ++i;
    for (; slots_[i].fp == fp && slots_[i].id != kEmpty; ++i) {
      if (key_of(slots_[i].id) == key) return {&slots_[i].id, false};
    }
    // i is where `key` goes; the run from i to its end moves one slot right.
    std::size_t end = i;
    while (slots_[end].id != kEmpty) ++end;
    if (end + 1 == length_) return InsertAfterRehash(key, key_of);  // would fill the sentinel
    for (std::size_t j = end; j > i; --j) slots_[j] = slots_[j - 1];
    slots_[i] = Slot{fp, kEmpty - 1};  // claimed; the caller writes the id
    ++size_;
    return {&slots_[i].id, true};
  }

  // Removes `key`; returns false when absent.
  template <typename KeyOf>
  bool Erase(std::uint64_t key, const KeyOf& key_of) {
    const std::size_t i = IndexOf(key, key_of);
    if (i == kNotFound) return false;
    EraseSlot(i);
    return true;
  }

  // Removes the element whose id `id` points to (from Find or Insert, claimed or not): a
  // caller that just found it saves probing for the key again.
  void EraseAt(const std::uint32_t* id) {
    const auto* slot =
        reinterpret_cast<const Slot*>(reinterpret_cast<const char*>(id) - offsetof(Slot, id));
    EraseSlot(static_cast<std::size_t>(slot - slots_.get()));
  }

  void Clear() {
    slots_.reset();
    capacity_ = length_ = size_ = 0;
  }

  // Calls fn(id) for every element, in unspecified order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (std::size_t i = 0; i < length_; ++i) {
      if (slots_[i].id != kEmpty) fn(slots_[i].id);
    }
  }

  // Calls fn(fingerprint, id) for every element, in unspecified order. The fingerprint is
  // the top half of MixKey(key) (EngineMap rebuilds its hashes from it).
  template <typename Fn>
  void ForEachWithFingerprint(Fn&& fn) const {
    for (std::size_t i = 0; i < length_; ++i) {
      if (slots_[i].id != kEmpty) fn(slots_[i].fp, slots_[i].id);
    }
  }

  // Test hook: whether the layout invariant holds (as IndexFlatMap::CheckLayout, by
  // fingerprint; empty slots carry kEmptyFp). O(capacity).
  bool CheckLayout() const {
    if (capacity_ == 0) return size_ == 0 && length_ == 0;
    if (length_ < capacity_ + TableSlack(capacity_) || slots_[length_ - 1].id != kEmpty) {
      return false;
    }
    std::size_t count = 0;
    for (std::size_t i = 0; i < length_; ++i) {
      const Slot& s = slots_[i];
      if (s.id == kEmpty) {
        if (s.fp != kEmptyFp) return false;
        continue;
      }
      ++count;
      const std::size_t home = TableHome(s.fp, capacity_);
      if (home > i) return false;
      for (std::size_t j = home; j < i; ++j) {
        if (slots_[j].id == kEmpty) return false;
      }
      if (i > 0 && slots_[i - 1].id != kEmpty && slots_[i - 1].fp > s.fp) return false;
    }
    return count == size_;
  }

 private:
  // The fingerprint of empty slots: no fingerprint is larger, so a scan for smaller ones
  // stops there.
  static constexpr std::uint32_t kEmptyFp = 0xFFFFFFFFu;
  struct Slot {
    std::uint32_t fp;
    std::uint32_t id;  // kEmpty: free
  };
  static_assert(sizeof(Slot) == 8);
  static constexpr std::size_t kNotFound = ~std::size_t{0};

  // The slot holding `key`, or kNotFound.
  template <typename KeyOf>
  std::size_t IndexOf(std::uint64_t key, const KeyOf& key_of) const {
    if (capacity_ == 0) return kNotFound;
    const std::uint32_t fp = Fingerprint(key);
    std::size_t i = TableHome(fp, capacity_);
    while (slots_[i].fp < fp) ++i;
    for (; slots_[i].fp == fp; ++i) {
      if (slots_[i].id == kEmpty) return kNotFound;
      if (key_of(slots_[i].id) == key) return i;
    }
    return kNotFound;
  }

  // Backward shift: later members of the run move back while they sit after their home.
  void EraseSlot(std::size_t i) {
    std::size_t j = i + 1;
    for (; slots_[j].id != kEmpty && TableHome(slots_[j].fp, capacity_) < j; ++j) {
      slots_[j - 1] = slots_[j];
    }
    slots_[j - 1] = Slot{kEmptyFp, kEmpty};
    --size_;
    if (TableMayShrink(size_, capacity_)) Rehash(TableShrunkCapacity(size_));
  }

  // The top half of MixKey (Fibonacci hashing of the folded key, as IndexFlatMap's hash):
  // both the fingerprint and (scaled) the home slot.
  static std::uint32_t Fingerprint(std::uint64_t key) {
    return static_cast<std::uint32_t>(MixKey(key) >> 32);
  }

  // As IndexFlatMap::InsertAfterRehash: out of line so that Insert inlines.
  template <typename KeyOf>
  [[gnu::noinline]] std::pair<std::uint32_t*, bool> InsertAfterRehash(std::uint64_t key,
                                                                      const KeyOf& key_of) {
    Rehash(capacity_, length_ + TableSlack(capacity_));
    return Insert(key, key_of);
  }

  // Moves every element into an array for `new_capacity` (RehashSorted, shared with
  // IndexFlatMap): the home of an element is read from its fingerprint. Out of line, as
  // IndexFlatMap::Rehash.
  [[gnu::noinline]] void Rehash(std::size_t new_capacity, std::size_t min_length = 0) {
    TableArray<Slot> fresh;
    Slot* to = nullptr;  // raw pointers: the loops keep them in registers
    const Slot* from = slots_.get();
    const std::size_t new_length = RehashSorted(
        length_, new_capacity, min_length, [&](std::size_t i) { return from[i].id != kEmpty; },
        [&](std::size_t i) { return TableHome(from[i].fp, new_capacity); },
        [&](std::size_t n) {
          fresh = AllocateTableArray<Slot>(n, /*zero=*/false);
          to = fresh.get();
          for (std::size_t k = 0; k < n; ++k) to[k] = Slot{kEmptyFp, kEmpty};
        },
        [&](std::size_t i, std::size_t j) { to[j] = from[i]; });
    slots_ = std::move(fresh);
    capacity_ = new_capacity;
    length_ = new_length;
  }

  TableArray<Slot> slots_;
  std::size_t capacity_ = 0;  // 0 or >= 16, at most 2^32; homes lie in [0, capacity_)
  std::size_t length_ = 0;    // slots: capacity_ + slack, the last one always empty
  std::size_t size_ = 0;
};

}  // namespace kvroute::kv
