// IndexFlatMap: an open-addressing hash map from 64-bit keys to small values, used by the
// KV block index for its per-worker engine-hash maps (through EngineMap), hole sets and
// worker slots. The BlockKey -> node table is NodeTable (index_node_table.h), which keeps
// only a fingerprint per slot and probes the same way.
//
// Why not std::unordered_map: the index holds ~10M entries and every byte per entry counts
// (target <= 48 B per (block, worker) entry); a node-based map costs ~40 B of overhead per
// element and a pointer chase per probe. This map stores keys and values in two flat arrays,
// so a lookup is usually one cache miss and the overhead is the empty slots. Capacities are
// not powers of two (TableHome maps a 32-bit hash onto any capacity with a multiply), so
// tables grow by 1.25x at load 0.75 and stay between 0.6 and 0.75 full while growing, where
// doubling left them between 0.375 and 0.75.
//
// Probing: "sorted" linear probing, i.e. Robin Hood with homes monotone in the hash. The
// array never wraps (a few slack slots after the last home, TableSlack), and every run of
// occupied slots is sorted by the 32-bit hash, so each element sits at or after its home and
// everything between its home and it is occupied. Why: plain linear probing at load 0.6-0.75
// made a miss scan to the end of the run and an erase shift-check every later member of it
// (~1/(1-load)^2 slots); sorted, a miss stops at the first larger hash and an erase shifts
// back only the members displaced from their home (an element at its home ends the shift).
// Insert still moves the rest of the run one slot right (a short copy, no hashing).
//
// Key 0 is a legal key: it lives in a side slot because 0 marks empty array slots.
// Keys are hashed (Fibonacci hashing, see Hash) before probing, so sequential or
// low-entropy engine hashes still spread.
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
// pass load 0.75; shrink to load 0.5 below 1/8. Why not 0.8: with plain linear probing the
// last 0.05 of load cost ~8% more apply instructions (579 against 535 per block); with
// sorted probing see src/kv/README.md "Measured".
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
// Slots kept after the last home so that runs never wrap (file comment): the array has at
// least capacity + TableSlack(capacity) slots and its last slot is always empty (a sentinel
// that ends every scan). A run that would reach the sentinel rehashes with more slack, so
// even crafted keys with one hash stay correct (just slow).
inline std::size_t TableSlack(std::size_t capacity) { return capacity < 32 ? capacity : 32; }
// Array length for `capacity` when the last element of a sorted layout lands at `last`
// (or the table is empty: last = 0).
inline std::size_t TableLength(std::size_t capacity, std::size_t last) {
  return (capacity > last + 1 ? capacity : last + 1) + TableSlack(capacity);
}

template <typename V>
class IndexFlatMap {
 public:
  IndexFlatMap() = default;
  IndexFlatMap(IndexFlatMap&&) noexcept = default;
  IndexFlatMap& operator=(IndexFlatMap&&) noexcept = default;

  std::size_t size() const { return size_ + (has_zero_ ? 1 : 0); }
  bool empty() const { return size() == 0; }
  // Nominal capacity (what the load policy counts); the arrays hold a few slack slots more.
  std::size_t capacity() const { return capacity_; }

  // Heap bytes held by the arrays (for memory reporting), slack included.
  std::size_t capacity_bytes() const { return length_ * (sizeof(std::uint64_t) + sizeof(V)); }

  const V* Find(std::uint64_t key) const {
    if (key == 0) return has_zero_ ? &zero_value_ : nullptr;
    if (capacity_ == 0) return nullptr;
    const std::uint32_t h = Hash(key);
    for (std::size_t i = TableHome(h, capacity_);; ++i) {
      const std::uint64_t k = keys_[i];
      if (k == key) return &values_[i];
      if (k == 0 || Hash(k) > h) return nullptr;  // sorted: `key` would be before here
    }
  }
  V* Find(std::uint64_t key) {
    return const_cast<V*>(static_cast<const IndexFlatMap*>(this)->Find(key));
  }

  // Hints the CPU to load the home slot of `key` (lookups walk known key lists).
  void Prefetch(std::uint64_t key) const {
    if (capacity_ != 0) __builtin_prefetch(&keys_[TableHome(Hash(key), capacity_)]);
  }

  // Returns the value for `key`, inserting `init` if absent; second = true when inserted.
  // Inserting moves other elements: pointers from earlier calls are invalid afterwards.
  // Always inlined: on the apply path the call itself cost ~5% of an event's instructions.
  [[gnu::always_inline]] std::pair<V*, bool> Insert(std::uint64_t key, const V& init) {
    if (key == 0) {
      if (has_zero_) return {&zero_value_, false};
      has_zero_ = true;
      zero_value_ = init;
      return {&zero_value_, true};
    }
    if (TableMustGrow(size_ + 1, capacity_)) Rehash(TableGrownCapacity(capacity_));
    const std::uint32_t h = Hash(key);
    std::size_t i = TableHome(h, capacity_);
    for (;; ++i) {
      const std::uint64_t k = keys_[i];
      if (k == key) return {&values_[i], false};
      if (k == 0 || Hash(k) > h) break;
    }
    // i is where `key` goes; the run from i to its end moves one slot right.
    std::size_t end = i;
    while (keys_[end] != 0) ++end;
    if (end + 1 == length_) return InsertAfterRehash(key, init);  // would fill the sentinel
    for (std::size_t j = end; j > i; --j) {
      keys_[j] = keys_[j - 1];
      values_[j] = values_[j - 1];
    }
    keys_[i] = key;
    values_[i] = init;
    ++size_;
    return {&values_[i], true};
  }

  // Removes `key`; returns false when absent.
  bool Erase(std::uint64_t key) {
    if (key == 0) {
      bool had = has_zero_;
      has_zero_ = false;
      return had;
    }
    V* value = Find(key);
    if (value == nullptr) return false;
    EraseSlot(static_cast<std::size_t>(value - values_.get()));
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
    capacity_ = length_ = size_ = 0;
    has_zero_ = false;
  }

  // Calls fn(key, const V&) for every element, in unspecified order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    if (has_zero_) fn(std::uint64_t{0}, zero_value_);
    for (std::size_t i = 0; i < length_; ++i) {
      if (keys_[i] != 0) fn(keys_[i], values_[i]);
    }
  }

  // Test hook: whether the layout invariant holds (every element at or after its home, the
  // slots between its home and it occupied, runs sorted by hash, the last slot empty, the
  // size right). O(capacity).
  bool CheckLayout() const {
    if (capacity_ == 0) return size_ == 0 && length_ == 0;
    if (length_ < capacity_ + TableSlack(capacity_) || keys_[length_ - 1] != 0) return false;
    std::size_t count = 0;
    for (std::size_t i = 0; i < length_; ++i) {
      if (keys_[i] == 0) continue;
      ++count;
      const std::uint32_t h = Hash(keys_[i]);
      const std::size_t home = TableHome(h, capacity_);
      if (home > i) return false;
      for (std::size_t j = home; j < i; ++j) {
        if (keys_[j] == 0) return false;
      }
      if (i > 0 && keys_[i - 1] != 0 && Hash(keys_[i - 1]) > h) return false;
    }
    return count == size_;
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
  // instructions where murmur3's fmix64 took eight; sorted probing computes it for every
  // slot a miss or an erase passes.
  static std::uint32_t Hash(std::uint64_t key) {
    return static_cast<std::uint32_t>(((key ^ (key >> 32)) * 0x9E3779B97F4A7C15ULL) >> 32);
  }

  // The rare path of Insert (kept out of line so that Insert inlines): the run would fill
  // the sentinel, so rehash at the same capacity into TableSlack more slots, which leaves
  // at least that many free after the last element, and insert again.
  [[gnu::noinline]] std::pair<V*, bool> InsertAfterRehash(std::uint64_t key, const V& init) {
    Rehash(capacity_, length_ + TableSlack(capacity_));
    return Insert(key, init);
  }

  // Backward-shift deletion of array slot i: later members of the run move back one slot
  // while they sit after their home; the first one at its home (or an empty slot) ends it.
  void EraseSlot(std::size_t i) {
    std::size_t j = i + 1;
    for (; keys_[j] != 0 && TableHome(Hash(keys_[j]), capacity_) < j; ++j) {
      keys_[j - 1] = keys_[j];
      values_[j - 1] = values_[j];
    }
    keys_[j - 1] = 0;
    --size_;
    if (TableMayShrink(size_, capacity_)) Rehash(TableShrunkCapacity(size_));
  }

  // Moves every element into arrays for `new_capacity`. The old arrays are sorted by hash
  // (no wrap), so elements are placed in order at max(home, previous + 1), in one pass into
  // capacity + slack slots; only if the last run would reach the sentinel (rare: crafted or
  // unlucky hashes at the top of the range) is the needed length computed and the pass
  // redone.
  void Rehash(std::size_t new_capacity, std::size_t min_length = 0) {
    std::size_t new_length = TableLength(new_capacity, 0);
    if (new_length < min_length) new_length = min_length;
    for (;;) {
      Array<std::uint64_t> new_keys = Allocate<std::uint64_t>(new_length, /*zero=*/true);
      Array<V> new_values = Allocate<V>(new_length, /*zero=*/false);
      std::size_t next = 0;  // first slot the next element may take
      bool fits = true;
      for (std::size_t i = 0; i < length_; ++i) {
        if (keys_[i] == 0) continue;
        const std::size_t home = TableHome(Hash(keys_[i]), new_capacity);
        const std::size_t j = home > next ? home : next;
        next = j + 1;
        if (next >= new_length) {
          fits = false;
          continue;  // keep counting to learn the last position
        }
        new_keys[j] = keys_[i];
        new_values[j] = values_[i];
      }
      if (!fits) {
        new_length = TableLength(new_capacity, next - 1);
        continue;
      }
      keys_ = std::move(new_keys);
      values_ = std::move(new_values);
      capacity_ = new_capacity;
      length_ = new_length;
      return;
    }
  }

  Array<std::uint64_t> keys_;
  Array<V> values_;
  std::size_t capacity_ = 0;  // 0 or >= 16, at most 2^32; homes lie in [0, capacity_)
  std::size_t length_ = 0;    // array slots: capacity_ + slack, last one always empty
  std::size_t size_ = 0;      // non-zero keys stored in the arrays
  bool has_zero_ = false;
  V zero_value_{};
};

}  // namespace kvroute::kv
