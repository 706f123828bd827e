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
// tables grow by 1.25x at load 0.85 and stay between 0.68 and 0.85 full while growing
// (TableMustGrow), where doubling left them between 0.375 and 0.75.
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
// Keys are stored mixed (MixKey, a bijection whose top half is the Fibonacci hash): probing
// compares mixes, and the home of a stored element is read from its mix without hashing it
// again (a miss, an erase's shift and a rehash used to hash every element they passed), so
// sequential or low-entropy engine hashes still spread. Every key is legal: empty slots hold
// the largest mix, and the one key that mixes to it lives in a side slot.
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

// Capacity policy shared by IndexFlatMap and NodeTable: grow by 1 + 1/kTableGrowthDiv (1.25x)
// when an insert would pass load kTableMaxLoadNum / kTableMaxLoadDen (0.85; 0.75 until
// session 5); shrink to load 0.5 below 1/8. So a growing table sits in (0.68, 0.85], 0.76 on
// average over a growth cycle (0.67 at 0.75): the node table and the engine maps have one
// slot each per unshared (block, worker) entry, so their load sets most of the bytes per
// entry beyond the node (src/kv/README.md "Data structures"). Sorted probing keeps finds and
// erases short at this load; what grows is an insert's move of the rest of its run (+11%
// apply instructions for 62.5 -> 56.5 bytes per entry, README "Measured"). 7/8 at 1.25x cost
// the same in the apply benchmark and saved nothing more in the 10M-entry world; 7/8 at
// 1.125x saved 0.2 B more for +16% instructions. Plain linear probing could not go there
// (at 0.8 it cost ~8% more apply instructions than at 0.75).
// Growing by 1.25x moves each element ~4 times over its table's growth (~1 at 2x); tables of
// a stationary index do not grow.
inline constexpr std::size_t kTableMaxLoadNum = 17;
inline constexpr std::size_t kTableMaxLoadDen = 20;
inline constexpr std::size_t kTableGrowthDiv = 4;
inline bool TableMustGrow(std::size_t size_after_insert, std::size_t capacity) {
  return size_after_insert * kTableMaxLoadDen > capacity * kTableMaxLoadNum;
}
inline std::size_t TableGrownCapacity(std::size_t capacity) {
  return capacity < 16 ? 16 : capacity + capacity / kTableGrowthDiv;
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

// A 64-bit key mixed bijectively (the fold key ^ key >> 32 is an involution, the multiply
// by an odd constant is invertible mod 2^64): the top 32 bits are Fibonacci hashing of the
// folded key (the fold lets high-only differences, a worker id in the top bits, reach the
// product's low half; the multiply spreads sequential keys evenly), scaled onto the table by
// TableHome. Distinct keys give distinct mixes, so a table can store the mix instead of the
// key, compare mixes instead of keys and read the home of a stored element without hashing
// it again (IndexFlatMap), and UnmixKey gives the key back.
inline constexpr std::uint64_t kMixMultiplier = 0x9E3779B97F4A7C15ULL;
inline constexpr std::uint64_t MixInverseMultiplier() {
  std::uint64_t inv = kMixMultiplier;  // Newton's iteration for the inverse mod 2^64
  for (int i = 0; i < 6; ++i) inv *= 2 - kMixMultiplier * inv;
  return inv;
}
inline constexpr std::uint64_t MixKey(std::uint64_t key) {
  return (key ^ (key >> 32)) * kMixMultiplier;
}
inline constexpr std::uint64_t UnmixKey(std::uint64_t mixed) {
  const std::uint64_t fold = mixed * MixInverseMultiplier();
  return fold ^ (fold >> 32);
}
static_assert(kMixMultiplier * MixInverseMultiplier() == 1);
static_assert(UnmixKey(MixKey(0x0123456789ABCDEFULL)) == 0x0123456789ABCDEFULL);

// Runs of sorted probing are placed in order at max(home, previous + 1) when a table is
// rebuilt for `new_capacity` (both tables keep their elements sorted by home, no wrap), in
// one pass into TableLength(new_capacity, 0) (or `min_length`) slots; only if the last run
// would reach the sentinel (crafted or unlucky hashes at the top of the range) is the needed
// length computed and the pass redone. Shared by IndexFlatMap and NodeTable, which differ
// only in their slot layout: `home(i)` is old element i's home in the new table (i ranges
// over old slots where `occupied(i)`), `allocate(n)` prepares n empty new slots, `place(i, j)`
// copies old element i into new slot j. Returns the new length.
template <typename Occupied, typename Home, typename Allocate, typename Place>
std::size_t RehashSorted(std::size_t old_length, std::size_t new_capacity, std::size_t min_length,
                         Occupied&& occupied, Home&& home, Allocate&& allocate, Place&& place) {
  std::size_t new_length = TableLength(new_capacity, 0);
  if (new_length < min_length) new_length = min_length;
  for (;;) {
    allocate(new_length);
    std::size_t next = 0;  // first slot the next element may take
    bool fits = true;
    for (std::size_t i = 0; i < old_length; ++i) {
      if (!occupied(i)) continue;
      const std::size_t h = home(i);
      const std::size_t j = h > next ? h : next;
      next = j + 1;
      if (next >= new_length) {
        fits = false;
        continue;  // keep counting to learn the last position
      }
      place(i, j);
    }
    if (fits) return new_length;
    new_length = TableLength(new_capacity, next - 1);
  }
}

template <typename V>
class IndexFlatMap {
 public:
  IndexFlatMap() = default;
  IndexFlatMap(IndexFlatMap&&) noexcept = default;
  IndexFlatMap& operator=(IndexFlatMap&&) noexcept = default;

  std::size_t size() const { return size_ + (has_special_ ? 1 : 0); }
  bool empty() const { return size() == 0; }
  // Nominal capacity (what the load policy counts); the arrays hold a few slack slots more.
  std::size_t capacity() const { return capacity_; }

  // Heap bytes held by the arrays (for memory reporting), slack included.
  std::size_t capacity_bytes() const { return length_ * (sizeof(std::uint64_t) + sizeof(V)); }

  const V* Find(std::uint64_t key) const {
    const std::uint64_t m = MixKey(key);
    if (m == kEmpty) return has_special_ ? &special_value_ : nullptr;
    if (capacity_ == 0) return nullptr;
    std::size_t i = TableHome(Hash(m), capacity_);
    while (mixed_[i] < m) ++i;  // sorted; the empty marker is larger than every mix
    return mixed_[i] == m ? &values_[i] : nullptr;
  }
  V* Find(std::uint64_t key) {
    return const_cast<V*>(static_cast<const IndexFlatMap*>(this)->Find(key));
  }

  // Hints the CPU to load the home slot of `key` (lookups walk known key lists).
  void Prefetch(std::uint64_t key) const {
    if (capacity_ != 0) __builtin_prefetch(&mixed_[TableHome(Hash(MixKey(key)), capacity_)]);
  }

  // Returns the value for `key`, inserting `init` if absent; second = true when inserted.
  // Inserting moves other elements: pointers from earlier calls are invalid afterwards.
  // Always inlined: on the apply path the call itself cost ~5% of an event's instructions.
  [[gnu::always_inline]] std::pair<V*, bool> Insert(std::uint64_t key, const V& init) {
    const std::uint64_t m = MixKey(key);
    if (m == kEmpty) {
      if (has_special_) return {&special_value_, false};
      has_special_ = true;
      special_value_ = init;
      return {&special_value_, true};
    }
    if (TableMustGrow(size_ + 1, capacity_)) Rehash(TableGrownCapacity(capacity_));
    std::size_t i = TableHome(Hash(m), capacity_);
    while (mixed_[i] < m) ++i;
    if (mixed_[i] == m) return {&values_[i], false};
    // i is where `key` goes; the run from i to its end moves one slot right.
    std::size_t end = i;
    while (mixed_[end] != kEmpty) ++end;
    if (end + 1 == length_) return InsertAfterRehash(key, init);  // would fill the sentinel
    for (std::size_t j = end; j > i; --j) {
      mixed_[j] = mixed_[j - 1];
      values_[j] = values_[j - 1];
    }
    mixed_[i] = m;
    values_[i] = init;
    ++size_;
    return {&values_[i], true};
  }

  // Removes `key`; returns false when absent.
  bool Erase(std::uint64_t key) {
    V* value = Find(key);
    if (value == nullptr) return false;
    EraseAt(value);
    return true;
  }

  // Removes the element whose value `value` points to (from Find or Insert): a caller that
  // just found it saves probing for the key again.
  void EraseAt(const V* value) {
    if (value == &special_value_) {
      has_special_ = false;
      return;
    }
    EraseSlot(static_cast<std::size_t>(value - values_.get()));
  }

  void Clear() {
    mixed_.reset();
    values_.reset();
    capacity_ = length_ = size_ = 0;
    has_special_ = false;
  }

  // Calls fn(key, const V&) for every element, in unspecified order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    if (has_special_) fn(UnmixKey(kEmpty), special_value_);
    for (std::size_t i = 0; i < length_; ++i) {
      if (mixed_[i] != kEmpty) fn(UnmixKey(mixed_[i]), values_[i]);
    }
  }

  // Test hook: whether the layout invariant holds (every element at or after its home, the
  // slots between its home and it occupied, runs sorted by mixed key, the last slot empty,
  // the size right). O(capacity).
  bool CheckLayout() const {
    if (capacity_ == 0) return size_ == 0 && length_ == 0;
    if (length_ < capacity_ + TableSlack(capacity_) || mixed_[length_ - 1] != kEmpty) {
      return false;
    }
    std::size_t count = 0;
    for (std::size_t i = 0; i < length_; ++i) {
      if (mixed_[i] == kEmpty) continue;
      ++count;
      const std::size_t home = TableHome(Hash(mixed_[i]), capacity_);
      if (home > i) return false;
      for (std::size_t j = home; j < i; ++j) {
        if (mixed_[j] == kEmpty) return false;
      }
      if (i > 0 && mixed_[i - 1] != kEmpty && mixed_[i - 1] > mixed_[i]) return false;
    }
    return count == size_;
  }

 private:
  static_assert(std::is_trivially_copyable_v<V>, "arrays are malloc'ed and copied raw");
  // Empty array slots hold the largest mix, so "mix < mine" alone stops at an empty slot;
  // the one key that mixes to it (UnmixKey(kEmpty)) lives in a side slot.
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

  // The 32-bit hash of a mixed key: its top half (MixKey).
  static std::uint32_t Hash(std::uint64_t mixed) { return static_cast<std::uint32_t>(mixed >> 32); }

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
    for (; mixed_[j] != kEmpty && TableHome(Hash(mixed_[j]), capacity_) < j; ++j) {
      mixed_[j - 1] = mixed_[j];
      values_[j - 1] = values_[j];
    }
    mixed_[j - 1] = kEmpty;
    --size_;
    if (TableMayShrink(size_, capacity_)) Rehash(TableShrunkCapacity(size_));
  }

  // Moves every element into arrays for `new_capacity` (RehashSorted). Out of line: it is
  // the rare path of Insert and Erase, and inlined it cost their callers registers.
  [[gnu::noinline]] void Rehash(std::size_t new_capacity, std::size_t min_length = 0) {
    TableArray<std::uint64_t> new_mixed;
    TableArray<V> new_values;
    // Raw pointers: the loops keep them in registers.
    std::uint64_t* to_mixed = nullptr;
    V* to_values = nullptr;
    const std::uint64_t* from_mixed = mixed_.get();
    const V* from_values = values_.get();
    const std::size_t new_length = RehashSorted(
        length_, new_capacity, min_length, [&](std::size_t i) { return from_mixed[i] != kEmpty; },
        [&](std::size_t i) { return TableHome(Hash(from_mixed[i]), new_capacity); },
        [&](std::size_t n) {
          new_mixed = AllocateTableArray<std::uint64_t>(n, /*zero=*/false);
          std::memset(new_mixed.get(), 0xFF, n * sizeof(std::uint64_t));  // all kEmpty
          new_values = AllocateTableArray<V>(n, /*zero=*/false);
          to_mixed = new_mixed.get();
          to_values = new_values.get();
        },
        [&](std::size_t i, std::size_t j) {
          to_mixed[j] = from_mixed[i];
          to_values[j] = from_values[i];
        });
    mixed_ = std::move(new_mixed);
    values_ = std::move(new_values);
    capacity_ = new_capacity;
    length_ = new_length;
  }

  TableArray<std::uint64_t> mixed_;  // MixKey of each element's key; kEmpty: free
  TableArray<V> values_;
  std::size_t capacity_ = 0;  // 0 or >= 16, at most 2^32; homes lie in [0, capacity_)
  std::size_t length_ = 0;    // array slots: capacity_ + slack, last one always empty
  std::size_t size_ = 0;      // elements stored in the arrays
  bool has_special_ = false;  // the key whose mix is kEmpty is present
  V special_value_{};
};

}  // namespace kvroute::kv
