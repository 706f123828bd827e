// IndexFlatMap: an open-addressing hash map from 64-bit keys to small values, used by the
// KV block index for its node table (BlockKey -> node id) and per-worker engine-hash maps.
//
// Why not std::unordered_map: the index holds ~10M entries and every byte per entry counts
// (target <= 48 B per (block, worker) entry); a node-based map costs ~40 B of overhead per
// element and a pointer chase per probe. This map stores keys and values in two flat arrays
// (linear probing, backward-shift deletion, no tombstones), so a lookup is usually one cache
// miss and the overhead is the empty slots (load factor kept in (3/8, 3/4]).
//
// Key 0 is a legal key: it lives in a side slot because 0 marks empty array slots.
// Keys are mixed (murmur3 fmix64) before probing, so sequential or low-entropy engine hashes
// still spread.
//
// Ownership: owns its arrays. Thread safety: none; the owner (KvIndex) serializes access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace kvroute::kv {

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
    for (std::size_t i = Home(key);; i = (i + 1) & mask_) {
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
    if ((size_ + 1) * 4 > capacity_ * 3) Rehash(capacity_ == 0 ? 16 : capacity_ * 2);
    for (std::size_t i = Home(key);; i = (i + 1) & mask_) {
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
    for (;; i = (i + 1) & mask_) {
      if (keys_[i] == key) break;
      if (keys_[i] == 0) return false;
    }
    // Backward-shift deletion: move later members of the probe run into the hole when their
    // home slot does not lie cyclically in (hole, j].
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask_; keys_[j] != 0; j = (j + 1) & mask_) {
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
    if (capacity_ > 16 && size_ * 8 < capacity_) Rehash(capacity_ / 2);
    return true;
  }

  void Clear() {
    keys_.reset();
    values_.reset();
    capacity_ = mask_ = size_ = 0;
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
  static std::uint64_t Mix(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
  }
  std::size_t Home(std::uint64_t key) const { return Mix(key) & mask_; }

  void Rehash(std::size_t new_capacity) {
    std::unique_ptr<std::uint64_t[]> old_keys = std::move(keys_);
    std::unique_ptr<V[]> old_values = std::move(values_);
    std::size_t old_capacity = capacity_;
    keys_ = std::make_unique<std::uint64_t[]>(new_capacity);  // zero-filled = empty
    values_ = std::make_unique_for_overwrite<V[]>(new_capacity);
    capacity_ = new_capacity;
    mask_ = new_capacity - 1;
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (old_keys[i] == 0) continue;
      std::size_t j = Home(old_keys[i]);
      while (keys_[j] != 0) j = (j + 1) & mask_;
      keys_[j] = old_keys[i];
      values_[j] = old_values[i];
    }
  }

  std::unique_ptr<std::uint64_t[]> keys_;
  std::unique_ptr<V[]> values_;
  std::size_t capacity_ = 0;  // 0 or a power of two
  std::size_t mask_ = 0;
  std::size_t size_ = 0;  // non-zero keys stored in the arrays
  bool has_zero_ = false;
  V zero_value_{};
};

}  // namespace kvroute::kv
