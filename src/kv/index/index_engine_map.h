// EngineMap: one worker's engine-hash -> node mapping, with a reference count per hash
// (stores minus removals of that hash, all tiers together). Part of KvIndex (kv/index/index.h).
//
// Memory: this map has one slot per (block, worker) entry, so its slot size is a large share
// of the index's bytes per entry. A slot is 8 bytes (a NodeTable): the top half of the
// hash's mix (MixKey, a bijection) as the fingerprint, and the node id. The bottom half
// lives in the worker's entry at that node (KvIndex::Entry::hash_lo), where a lookup reads
// it to confirm a fingerprint match: a node has at most one entry per worker, so each
// (worker, node) has room for one such "primary" mapping. A second engine hash naming the
// same block in the same worker (what cache_salt does: two tenants' hashes for one content)
// goes to a small overflow map of whole hashes (`extra_`), empty in the common case. Almost
// every hash is stored once (count 1), so counts above 1 live in a side map and bit 31 of
// the value says "look there". Session 5's slot was 12 bytes (the whole hash and the node).
//
// The confirmation needs the owner's entries: calls that compare hashes take
// `lo_of(node) -> std::uint32_t`, the hash_lo of this worker's entry at `node` (called only
// for nodes a primary slot names, whose entries exist).
//
// Ownership: owns its maps. Thread safety: none; the owner (KvIndex) serializes access.
#pragma once

#include <cassert>
#include <cstdint>
#include <utility>

#include "kv/index/index_flat_map.h"
#include "kv/index/index_node_table.h"

namespace kvroute::kv {

class EngineMap {
 public:
  // Node ids must stay at or below this (a value with the count bit must differ from the
  // primary table's kEmpty and claimed markers).
  static constexpr std::uint32_t kMaxNode = 0x7FFFFFFDu;

  // Where one hash's value lives: a primary slot or an overflow entry. Valid until the next
  // change of this map.
  struct Mapping {
    std::uint32_t* value = nullptr;
    bool extra = false;
    explicit operator bool() const { return value != nullptr; }
  };

  // What a primary mapping's entry keeps: the bottom half of the hash's mix.
  static std::uint32_t Lo(std::uint64_t hash) { return static_cast<std::uint32_t>(MixKey(hash)); }

  std::size_t size() const { return primary_.size() + extra_.size(); }
  bool empty() const { return primary_.empty() && extra_.empty(); }
  std::size_t capacity_bytes() const {
    return primary_.capacity_bytes() + extra_.capacity_bytes() + multi_refs_.capacity_bytes();
  }

  template <typename LoOf>
  Mapping Find(std::uint64_t hash, const LoOf& lo_of) const {
    auto* self = const_cast<EngineMap*>(this);
    if (!extra_.empty()) {
      if (std::uint32_t* v = self->extra_.Find(hash)) return {v, true};
    }
    return {self->primary_.Find(hash, KeyOfPrimary(hash, lo_of)), false};
  }
  static std::uint32_t Node(std::uint32_t value) { return value & kNodeMask; }

  std::uint32_t Refs(std::uint64_t hash, std::uint32_t value) const {
    if ((value & kMulti) == 0) return 1;
    return *multi_refs_.Find(hash);
  }

  // Looks `hash` up, claiming a primary slot when absent (second = true). A claimed slot must
  // get its node with SetPrimary (the caller then stores Lo(hash) in the worker's entry at
  // that node), be moved with MoveToExtra, or be removed with Erase before any other call.
  template <typename LoOf>
  std::pair<Mapping, bool> Insert(std::uint64_t hash, const LoOf& lo_of) {
    if (!extra_.empty()) {
      if (std::uint32_t* v = extra_.Find(hash)) return {{v, true}, false};
    }
    auto [v, inserted] = primary_.Insert(hash, KeyOfPrimary(hash, lo_of));
    return {{v, false}, inserted};
  }
  static void SetPrimary(Mapping m, std::uint32_t node) {
    assert(!m.extra && node <= kMaxNode);
    *m.value = node;
  }
  // A claimed primary slot becomes an overflow mapping to `node` (count 1): the worker's
  // entry at `node` already keeps another hash's bottom half.
  Mapping MoveToExtra(std::uint64_t hash, Mapping claimed, std::uint32_t node) {
    assert(!claimed.extra && node <= kMaxNode);
    primary_.EraseAt(claimed.value);
    return {extra_.Insert(hash, node).first, true};
  }
  // One more reference to an existing mapping.
  void AddRef(std::uint64_t hash, Mapping m) {
    if ((*m.value & kMulti) == 0) {
      *m.value |= kMulti;
      multi_refs_.Insert(hash, 2);
    } else {
      ++*multi_refs_.Find(hash);
    }
  }
  // One reference fewer; the mapping goes at zero. `m` is invalid afterwards.
  void DropRef(std::uint64_t hash, Mapping m) {
    if ((*m.value & kMulti) == 0) {
      EraseAt(m);
      return;
    }
    std::uint32_t* refs = multi_refs_.Find(hash);
    if (--*refs == 1) {
      multi_refs_.Erase(hash);
      *m.value &= kNodeMask;
    }
  }
  // Removes the mapping whatever its count. `m` is invalid afterwards.
  void Erase(std::uint64_t hash, Mapping m) {
    if ((*m.value & kMulti) != 0) multi_refs_.Erase(hash);
    EraseAt(m);
  }
  // Sets the count of a new mapping (snapshot restore, a map built from keys); refs >= 1.
  void SetRefs(std::uint64_t hash, Mapping m, std::uint32_t refs) {
    if (refs > 1) {
      *m.value |= kMulti;
      multi_refs_.Insert(hash, refs);
    }
  }

  void Clear() {
    primary_.Clear();
    extra_.Clear();
    multi_refs_.Clear();
  }

  // Calls fn(node) for every mapping (a node may come more than once), in unspecified order.
  template <typename Fn>
  void ForEachNode(Fn&& fn) const {
    primary_.ForEach([&](std::uint32_t value) { fn(Node(value)); });
    extra_.ForEach([&](std::uint64_t, const std::uint32_t& value) { fn(Node(value)); });
  }
  // Calls fn(hash, node, refs) for every mapping, in unspecified order.
  template <typename LoOf, typename Fn>
  void ForEach(const LoOf& lo_of, Fn&& fn) const {
    primary_.ForEachWithFingerprint([&](std::uint32_t fp, std::uint32_t value) {
      const std::uint64_t hash =
          UnmixKey((std::uint64_t{fp} << 32) | std::uint64_t{lo_of(Node(value))});
      fn(hash, Node(value), Refs(hash, value));
    });
    extra_.ForEach([&](std::uint64_t hash, const std::uint32_t& value) {
      fn(hash, Node(value), Refs(hash, value));
    });
  }

 private:
  static constexpr std::uint32_t kMulti = 0x80000000u;
  static constexpr std::uint32_t kNodeMask = 0x7FFFFFFFu;

  // The primary table compares keys through key_of(value); it calls it only for slots whose
  // fingerprint (the top half of the mix) equals `hash`'s, so the stored hash is that top
  // half joined with the entry's bottom half.
  template <typename LoOf>
  static auto KeyOfPrimary(std::uint64_t hash, const LoOf& lo_of) {
    const std::uint64_t top = MixKey(hash) & 0xFFFFFFFF00000000ULL;
    return [top, &lo_of](std::uint32_t value) {
      return UnmixKey(top | std::uint64_t{lo_of(Node(value))});
    };
  }
  void EraseAt(Mapping m) {
    if (m.extra) {
      extra_.EraseAt(m.value);
    } else {
      primary_.EraseAt(m.value);
    }
  }

  NodeTable primary_;                       // top half of the mix -> node id | kMulti
  IndexFlatMap<std::uint32_t> extra_;       // hash -> node id | kMulti: second hashes of a node
  IndexFlatMap<std::uint32_t> multi_refs_;  // hash -> count, only for counts >= 2
};

}  // namespace kvroute::kv
