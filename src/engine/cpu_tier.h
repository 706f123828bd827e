// CpuTier: the optional host-memory tier of the KV cache (EngineConfig::num_cpu_blocks), an
// LRU set of blocks offloaded from GPU.
//
// Semantics (kvroute's choice, documented in README.md):
//   - A block evicted from GPU is copied here (BlockStored medium "CPU"); if it is already
//     here it is only refreshed (no duplicate event).
//   - When the tier is full, its least recently used block goes (BlockRemoved medium "CPU").
//   - A prefix hit here loads the block back to GPU and KEEPS the CPU copy (refreshed), like
//     vLLM's offloading connector and LMCache: a later GPU eviction of the same block then
//     costs no copy and the CPU index entry stays valid.
//
// Ownership: owns its entries. Thread safety: none (the engine's single owner thread).
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "engine/block_meta.h"
#include "kv/kv_event.h"

namespace kvroute::engine {

class CpuTier {
 public:
  CpuTier(std::int64_t capacity_blocks, std::uint32_t block_size);

  std::int64_t capacity() const { return capacity_; }
  std::int64_t size() const { return static_cast<std::int64_t>(lru_.size()); }

  // The entry for `key`, or null. Does not change LRU order.
  const BlockMeta* Find(kv::BlockKey key) const;
  // Marks `key` most recently used. No-op when absent.
  void Touch(kv::BlockKey key);
  // Stores a copy of `meta` (evicting the LRU entry if full) and appends the events to
  // *events. An entry already present is only touched. Capacity 0 stores nothing.
  void Insert(const BlockMeta& meta, std::vector<kv::KvEvent>* events);
  // Drops every entry without events (the caller emits AllBlocksCleared).
  void Clear();
  std::vector<kv::EngineHash> Hashes() const;

 private:
  std::int64_t capacity_;
  std::uint32_t block_size_;
  std::list<BlockMeta> lru_;  // front = least recently used
  std::unordered_map<kv::BlockKey, std::list<BlockMeta>::iterator> index_;
};

}  // namespace kvroute::engine
