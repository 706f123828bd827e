// IndexFlatMap: an open-addressing hash map from 64-bit keys to small values, used by the
// KV block index for its per-worker engine-hash maps (through EngineMap), hole sets and
// worker slots. The BlockKey -> node table is NodeTable (index_node_table.h), which keeps
// only a fingerprint per slot.
//
// Why not std::unordered_map: the index holds ~10M entries and every byte per entry counts
// (target <= 48 B per (block, worker) entry); a node-based map costs ~40 B of overhead per
// element and a pointer chase per probe. This map stores keys and values in two flat arrays
// (linear probing, backward-shift deletion, no tombstones), so a lookup is usually one cache
// miss and the overhead is the empty slots. Capacities are not powers of two (TableHome maps
// a 32-bit hash onto any capacity with a multiply), so tables grow by 1.25x at load 0.75 and
// stay between 0.6 and 0.75 full while growing, where doubling left them between 0.375 and
// 0.75 (at 10M entries the benchmark's tables sat at 0.60: 13 of its 73 bytes per entry were
// empty slots).
//
// Key 0 is a legal key: it lives in a side slot because 0 marks empty array slots.
// Keys are hashed (Fibonacci hashing, see Home) before probing, so sequential or low-entropy engine
// hashes still spread.
//
// Arrays of 16 MiB and more (the node table at millions of blocks) are 2 MiB-aligned and
// advised MADV_HUGEPAGE: they are probed at random, so with 4 KiB pages nearly every probe of
// a large table also misses the TLB (a page walk, itself often a cache miss). With THP in
// "madvise" mode (a common default) the kernel backs them with huge pages; elsewhere the
// advice is a no-op.
//
// Ownership: owns its arrays. Thread safety: none; the owner (KvIndex) serializes access.
#pragma once

#include <sys/mman.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace kvroute::kv {

// A malloc'ed array of trivially copyable slots (the index's hash tables).
struct TableArrayFree {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
using TableArray = std::unique_ptr<T[], TableArrayFree>;

// Allocates n slots; arrays of 16 MiB and more are 2 MiB-aligned and advised MADV_HUGEPAGE
// (file comment).
template <typename T>
TableArray<T> AllocateTableArray(std::size_t n, bool zero) {
  static_assert(std::is_trivially_copyable_v<T>, "arrays are malloc'ed and copied raw");
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  constexpr std::size_t kHugeThreshold = std::size_t{16} << 20;
  std::size_t bytes = n * sizeof(T);
  void* p = nullptr;
  if (bytes >= kHugeThreshold) {
    bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    p = std::aligned_alloc(kHugePage, bytes);
    if (p != nullptr) madvise(p, bytes, MADV_HUGEPAGE);
  } else {
    p = std::malloc(bytes);
  }
  if (p == nullptr) throw std::bad_alloc();
  if (zero) std::memset(p, 0, bytes);
  return TableArray<T>(static_cast<T*>(p));
}

// Capacity policy shared by IndexFlatMap and NodeTable: grow by 1.25x when an insert would
// pass load 0.75; shrink to load 0.5 below 1/8. Why not 0.8: a miss or an erase in linear
// probing scans ~1/(1-load)^2 slots, so the last 0.05 of load cost ~8% more apply
// instructions (callgrind, BM_ApplyEvents: 579 against 535 per block) for ~2.3 B per entry.
// Growing by 1.25x moves each element ~4 times over its table's growth instead of ~1 time
// at 2x; tables of a stationary index do not grow.
inline bool TableMustGrow(std::size_t size_after_insert, std::size_t capacity) {
  return size_after_insert * 4 > capacity * 3;
}
inline std::size_t TableGrownCapacity(std::size_t capacity) {
  return capacity < 16 ? 16 : capacity + capacity / 4;
}
inline bool TableMayShrink(std::size_t size, std::size_t capacity) {
  return capacity > 16 && size * 8 < capacity;
}
inline std::size_t TableShrunkCapacity(std::size_t size) { return size < 8 ? 16 : size * 2; }
// Home slot of a 32-bit hash in a table of `capacity` (<= 2^32) slots: the hash's position
// scaled onto [0, capacity), so homes are monotone in the hash (NodeTable relies on it).
inline std::size_t TableHome(std::uint32_t hash, std::size_t capacity) {
  return static_cast<std::size_t>((std::uint64_t{hash} * capacity) >> 32);
}

template <typename V>
class IndexFlatMap {
 public:
  IndexFlatMap() = default;
  IndexFlatMap(IndexFlatMap&&) noexcept = default;
  IndexFlatMap& operator=(IndexFlatMap&&) noexcept = default;

  std::size_t size() const { return size_ + (has_zero_ ? 1 : 0); }
  bool empty() const { return size() == 0; }

  // Heap bytes held by the arrays (for memory reporting).
  std::size_t capacity_bytes() const { return capacity_ * (sizeof(std::uint64_t) + sizeof(V)); }

  const V* Find(std::uint64_t key) const {
    if (key == 0) return has_zero_ ? &zero_value_ : nullptr;
    if (capacity_ == 0) return nullptr;
    for (std::size_t i = Home(key);; i = Next(i)) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == 0) return nullptr;
    }
  }
  V* Find(std::uint64_t key) {
    return const_cast<V*>(static_cast<const IndexFlatMap*>(this)->Find(key));
  }

  // Hints the CPU to load the home slot of `key` (lookups walk known key lists).
  void Prefetch(std::uint64_t key) const {
    if (capacity_ != 0) __builtin_prefetch(&keys_[Home(key)]);
  }

  // Returns the value for `key`, inserting `init` if absent; second = true when inserted.
  std::pair<V*, bool> Insert(std::uint64_t key, const V& init) {
    if (key == 0) {
      if (has_zero_) return {&zero_value_, false};
      has_zero_ = true;
      zero_value_ = init;
      return {&zero_value_, true};
    }
    if (TableMustGrow(size_ + 1, capacity_)) Rehash(TableGrownCapacity(capacity_));
    for (std::size_t i = Home(key);; i = Next(i)) {
      if (keys_[i] == key) return {&values_[i], false};
      if (keys_[i] == 0) {
        keys_[i] = key;
        values_[i] = init;
        ++size_;
        return {&values_[i], true};
      }
    }
  }

  // Removes `key`; returns false when absent.
  bool Erase(std::uint64_t key) {
    if (key == 0) {
      bool had = has_zero_;
      has_zero_ = false;
      return had;
    }
    if (capacity_ == 0) return false;
    std::size_t i = Home(key);
    for (;; i = Next(i)) {
      if (keys_[i] == key) break;
      if (keys_[i] == 0) return false;
    }
    EraseSlot(i);
    return true;
  }

  // Removes the element whose value `value` points to (from Find or Insert): a caller that
  // just found it saves probing for the key again.
  void EraseAt(const V* value) {
    if (value == &zero_value_) {
      has_zero_ = false;
      return;
    }
    EraseSlot(static_cast<std::size_t>(value - values_.get()));
  }

  void Clear() {
    keys_.reset();
    values_.reset();
    capacity_ = size_ = 0;
    has_zero_ = false;
  }

  // Calls fn(key, const V&) for every element, in unspecified order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    if (has_zero_) fn(std::uint64_t{0}, zero_value_);
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (keys_[i] != 0) fn(keys_[i], values_[i]);
    }
  }

 private:
  static_assert(std::is_trivially_copyable_v<V>, "arrays are malloc'ed and copied raw");
  template <typename T>
  using Array = TableArray<T>;
  template <typename T>
  static Array<T> Allocate(std::size_t n, bool zero) {
    return AllocateTableArray<T>(n, zero);
  }

  // Fibonacci hashing of the key folded onto itself: the fold lets high-only differences
  // (worker id in the top bits) reach the product's low half, the multiply spreads sequential
  // keys evenly, and its top 32 bits are scaled onto the table (TableHome). A few
  // instructions where murmur3's fmix64 took eight; every probe and every element a deletion
  // shifts pays for one.
  std::size_t Home(std::uint64_t key) const {
    const auto hash =
        static_cast<std::uint32_t>(((key ^ (key >> 32)) * 0x9E3779B97F4A7C15ULL) >> 32);
    return TableHome(hash, capacity_);
  }
  std::size_t Next(std::size_t i) const { return i + 1 == capacity_ ? 0 : i + 1; }

  // Backward-shift deletion of array slot i: move later members of the probe run into the
  // hole when their home slot does not lie cyclically in (hole, j].
  void EraseSlot(std::size_t i) {
    std::size_t hole = i;
    for (std::size_t j = Next(i); keys_[j] != 0; j = Next(j)) {
      std::size_t home = Home(keys_[j]);
      bool home_in_range = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!home_in_range) {
        keys_[hole] = keys_[j];
        values_[hole] = values_[j];
        hole = j;
      }
    }
    keys_[hole] = 0;
    --size_;
    if (TableMayShrink(size_, capacity_)) Rehash(TableShrunkCapacity(size_));
  }

  void Rehash(std::size_t new_capacity) {
    Array<std::uint64_t> old_keys = std::move(keys_);
    Array<V> old_values = std::move(values_);
    std::size_t old_capacity = capacity_;
    keys_ = Allocate<std::uint64_t>(new_capacity, /*zero=*/true);  // zero = empty
    values_ = Allocate<V>(new_capacity, /*zero=*/false);
    capacity_ = new_capacity;
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (old_keys[i] == 0) continue;
      std::size_t j = Home(old_keys[i]);
      while (keys_[j] != 0) j = Next(j);
      keys_[j] = old_keys[i];
      values_[j] = old_values[i];
    }
  }

  Array<std::uint64_t> keys_;
  Array<V> values_;
  std::size_t capacity_ = 0;  // 0 or >= 16, at most 2^32; Home is only called when != 0
  std::size_t size_ = 0;      // non-zero keys stored in the arrays
  bool has_zero_ = false;
  V zero_value_{};
};

}  // namespace kvroute::kv
