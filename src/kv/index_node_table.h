// NodeTable: the KV block index's BlockKey -> node id table (kv/index.h). Open addressing
// with linear probing and backward-shift deletion, like IndexFlatMap, but a slot is 8 bytes:
// a 32-bit fingerprint of the key and the 32-bit node id. The key itself lives in the node,
// so a probe whose fingerprint matches is confirmed by comparing the node's key (the reader
// reads that node next anyway). IndexFlatMap<u32> spent 12 bytes per slot on the same job;
// at ~0.6 load that is ~7 bytes per (block, worker) entry saved for unshared blocks.
//
// The fingerprint is the top half of a multiplicative hash and the home slot is the
// fingerprint scaled onto the capacity (TableHome; any capacity, grown by 1.25x at load 0.75
// as IndexFlatMap), so the home of a stored element is known from its fingerprint alone:
// growing and deleting never read a node.
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

#include "kv/index_flat_map.h"

namespace kvroute::kv {

class NodeTable {
 public:
  static constexpr std::uint32_t kEmpty = 0xFFFFFFFFu;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t capacity_bytes() const { return capacity_ * sizeof(Slot); }

  template <typename KeyOf>
  const std::uint32_t* Find(std::uint64_t key, const KeyOf& key_of) const {
    if (capacity_ == 0) return nullptr;
    const std::uint32_t fp = Fingerprint(key);
    for (std::size_t i = TableHome(fp, capacity_);; i = Next(i)) {
      const Slot& s = slots_[i];
      if (s.id == kEmpty) return nullptr;
      if (s.fp == fp && key_of(s.id) == key) return &s.id;
    }
  }

  // The id of the first slot on `key`'s probe path whose fingerprint matches, or kEmpty.
  // Reads no node, so a caller resolving several keys can request all their nodes before
  // reading any; it must then confirm key_of(id) == key and, only if that fails (a
  // fingerprint collision, ~probes / 2^32), call Find.
  std::uint32_t Candidate(std::uint64_t key) const {
    if (capacity_ == 0) return kEmpty;
    const std::uint32_t fp = Fingerprint(key);
    for (std::size_t i = TableHome(fp, capacity_);; i = Next(i)) {
      const Slot& s = slots_[i];
      if (s.id == kEmpty || s.fp == fp) return s.id;
    }
  }

  // Hints the CPU to load `key`'s home slot.
  void Prefetch(std::uint64_t key) const {
    if (capacity_ != 0) __builtin_prefetch(&slots_[TableHome(Fingerprint(key), capacity_)]);
  }

  // Finds `key` or claims a slot for it (second = true). A claimed slot's id must be set
  // through the returned pointer before any other call.
  template <typename KeyOf>
  std::pair<std::uint32_t*, bool> Insert(std::uint64_t key, const KeyOf& key_of) {
    if (TableMustGrow(size_ + 1, capacity_)) Rehash(TableGrownCapacity(capacity_));
    const std::uint32_t fp = Fingerprint(key);
    for (std::size_t i = TableHome(fp, capacity_);; i = Next(i)) {
      Slot& s = slots_[i];
      if (s.id == kEmpty) {
        s.fp = fp;
        s.id = kEmpty - 1;  // claimed; the caller writes the id
        ++size_;
        return {&s.id, true};
      }
      if (s.fp == fp && key_of(s.id) == key) return {&s.id, false};
    }
  }

  // Removes `key`; returns false when absent.
  template <typename KeyOf>
  bool Erase(std::uint64_t key, const KeyOf& key_of) {
    if (capacity_ == 0) return false;
    const std::uint32_t fp = Fingerprint(key);
    std::size_t i = TableHome(fp, capacity_);
    for (;; i = Next(i)) {
      const Slot& s = slots_[i];
      if (s.id == kEmpty) return false;
      if (s.fp == fp && key_of(s.id) == key) break;
    }
    // Backward-shift deletion (see IndexFlatMap::Erase).
    std::size_t hole = i;
    for (std::size_t j = Next(i); slots_[j].id != kEmpty; j = Next(j)) {
      const std::size_t home = TableHome(slots_[j].fp, capacity_);
      const bool home_in_range =
          hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!home_in_range) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].id = kEmpty;
    --size_;
    if (TableMayShrink(size_, capacity_)) Rehash(TableShrunkCapacity(size_));
    return true;
  }

  void Clear() {
    slots_.reset();
    capacity_ = size_ = 0;
  }

  // Calls fn(id) for every element, in unspecified order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].id != kEmpty) fn(slots_[i].id);
    }
  }

 private:
  struct Slot {
    std::uint32_t fp;
    std::uint32_t id;  // kEmpty: free
  };
  static_assert(sizeof(Slot) == 8);

  // Fibonacci hashing of the folded key, as IndexFlatMap::Home; the top 32 bits of the
  // product are both the fingerprint and (scaled) the home slot.
  static std::uint32_t Fingerprint(std::uint64_t key) {
    return static_cast<std::uint32_t>(((key ^ (key >> 32)) * 0x9E3779B97F4A7C15ULL) >> 32);
  }

  void Rehash(std::size_t new_capacity) {
    TableArray<Slot> old = std::move(slots_);
    const std::size_t old_capacity = capacity_;
    slots_ = AllocateTableArray<Slot>(new_capacity, /*zero=*/false);
    for (std::size_t i = 0; i < new_capacity; ++i) slots_[i].id = kEmpty;
    capacity_ = new_capacity;
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (old[i].id == kEmpty) continue;
      std::size_t j = TableHome(old[i].fp, capacity_);
      while (slots_[j].id != kEmpty) j = Next(j);
      slots_[j] = old[i];
    }
  }

  std::size_t Next(std::size_t i) const { return i + 1 == capacity_ ? 0 : i + 1; }

  TableArray<Slot> slots_;
  std::size_t capacity_ = 0;  // 0 or >= 16, at most 2^32
  std::size_t size_ = 0;
};

}  // namespace kvroute::kv
