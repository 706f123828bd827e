// EngineMap: one worker's engine-hash -> node mapping, with a reference count per hash
// (stores minus removals of that hash, all tiers together). Part of KvIndex (kv/index.h).
//
// Memory: this map has one slot per (block, worker) entry, so its slot size is a large share
// of the index's bytes per entry. A slot is the 8-byte engine hash and a 4-byte value (the
// node id); almost every hash is stored once (count 1), so counts above 1 live in a side map
// and bit 31 of the value says "look there". 12 bytes per slot instead of 16.
//
// Ownership: owns its two maps. Thread safety: none; the owner (KvIndex) serializes access.
#pragma once

#include <cassert>
#include <cstdint>
#include <utility>

#include "kv/index_flat_map.h"

namespace kvroute::kv {

class EngineMap {
 public:
  // Node ids must stay below this (2^31 nodes: far beyond any memory this index could use).
  static constexpr std::uint32_t kMaxNode = 0x7FFFFFFFu;

  std::size_t size() const { return nodes_.size(); }
  bool empty() const { return nodes_.empty(); }
  std::size_t capacity_bytes() const {
    return nodes_.capacity_bytes() + multi_refs_.capacity_bytes();
  }

  // The node `hash` maps to, or nullptr. The pointer is valid until the next change.
  // Callers read the node through Node(*value).
  const std::uint32_t* Find(std::uint64_t hash) const { return nodes_.Find(hash); }
  std::uint32_t* Find(std::uint64_t hash) { return nodes_.Find(hash); }
  static std::uint32_t Node(std::uint32_t value) { return value & kNodeMask; }

  std::uint32_t Refs(std::uint64_t hash, std::uint32_t value) const {
    if ((value & kMulti) == 0) return 1;
    return *multi_refs_.Find(hash);
  }

  // Looks `hash` up, inserting a placeholder when absent (second = true). A placeholder
  // must get its node with SetNode (count 1) or be removed with Erase before any other call.
  std::pair<std::uint32_t*, bool> Insert(std::uint64_t hash) {
    return nodes_.Insert(hash, kNodeMask);
  }
  static void SetNode(std::uint32_t* value, std::uint32_t node) {
    assert(node <= kMaxNode);
    *value = node;
  }
  // One more reference to an existing mapping (`value` from Find or Insert).
  void AddRef(std::uint64_t hash, std::uint32_t* value) {
    if ((*value & kMulti) == 0) {
      *value |= kMulti;
      multi_refs_.Insert(hash, 2);
    } else {
      ++*multi_refs_.Find(hash);
    }
  }
  // One reference fewer; the mapping goes at zero. `value` is invalid afterwards.
  void DropRef(std::uint64_t hash, std::uint32_t* value) {
    if ((*value & kMulti) == 0) {
      nodes_.EraseAt(value);  // `value` is this hash's slot: no second probe
      return;
    }
    std::uint32_t* refs = multi_refs_.Find(hash);
    if (--*refs == 1) {
      multi_refs_.Erase(hash);
      *value &= kNodeMask;
    }
  }
  // Removes the mapping whatever its count.
  void Erase(std::uint64_t hash) {
    multi_refs_.Erase(hash);
    nodes_.Erase(hash);
  }
  // Sets the count of a new mapping (snapshot restore); refs >= 1.
  void SetRefs(std::uint64_t hash, std::uint32_t* value, std::uint32_t refs) {
    if (refs > 1) {
      *value |= kMulti;
      multi_refs_.Insert(hash, refs);
    }
  }

  void Clear() {
    nodes_.Clear();
    multi_refs_.Clear();
  }

  // Calls fn(hash, node, refs) for every mapping, in unspecified order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    nodes_.ForEach([&](std::uint64_t hash, const std::uint32_t& value) {
      fn(hash, Node(value), Refs(hash, value));
    });
  }

 private:
  static constexpr std::uint32_t kMulti = 0x80000000u;
  static constexpr std::uint32_t kNodeMask = 0x7FFFFFFFu;

  IndexFlatMap<std::uint32_t> nodes_;       // hash -> node id | kMulti
  IndexFlatMap<std::uint32_t> multi_refs_;  // hash -> count, only for counts >= 2
};

}  // namespace kvroute::kv
