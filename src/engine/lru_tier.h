// LruTier: one local lower tier of the KV cache — host memory ("CPU", EngineConfig::
// num_cpu_blocks) or local disk ("DISK", EngineConfig::disk) — an LRU set of blocks offloaded
// from the tier above.
//
// Semantics (kvroute's choice, documented in README.md "KV tiers"):
//   - A block evicted from the tier above is copied here (BlockStored with this tier's
//     medium); if it is already here it is only refreshed (no duplicate event).
//   - When the tier is full, its least recently used block goes: first to the spill tier
//     (host → disk) when there is one, then BlockRemoved with this tier's medium. So a block
//     is never held nowhere between two events.
//   - A prefix hit here loads the block back to GPU and KEEPS the copy (refreshed), like
//     vLLM's offloading connector and LMCache: a later GPU eviction of the same block then
//     costs no copy and this tier's index entry stays valid.
//   - With a write bandwidth (disk), copies are queued behind each other in simulated time
//     (SetNow): a copy that would start more than `max_write_backlog` after now is dropped
//     (counted), so a slow disk loses offloads instead of stalling the engine's step loop.
//
// Ownership: owns its entries; the spill tier is the caller's and must outlive this one.
// Thread safety: none (the engine's single owner thread).
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/types.h"
#include "engine/block_meta.h"
#include "kv/kv_event.h"

namespace kvroute::engine {

struct LruTierCounters {
  std::uint64_t stored = 0;          // blocks copied in
  std::uint64_t evicted = 0;         // blocks dropped for room (BlockRemoved)
  std::uint64_t dropped_writes = 0;  // copies refused: the write backlog was too long
};

class LruTier {
 public:
  // `medium`: the KV-event medium ("CPU", "DISK"). `spill`: where this tier's LRU victims go
  // (may be null).
  LruTier(std::int64_t capacity_blocks, std::uint32_t block_size, std::string medium = "CPU",
          LruTier* spill = nullptr);

  std::int64_t capacity() const { return capacity_; }
  std::int64_t size() const { return static_cast<std::int64_t>(lru_.size()); }
  const std::string& medium() const { return medium_; }
  const LruTierCounters& counters() const { return counters_; }

  // Copies into this tier take `bytes_per_block / write_bytes_per_s` each, one after another;
  // a copy that would start later than now + max_write_backlog is dropped. Off by default.
  void SetWriteModel(double bytes_per_block, double write_bytes_per_s, Nanos max_write_backlog);
  // The simulated time offloads are happening at (the engine's step start).
  void SetNow(Nanos now) { now_ = now; }

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
  bool AdmitWrite();

  std::int64_t capacity_;
  std::uint32_t block_size_;
  std::string medium_;
  LruTier* spill_;
  std::list<BlockMeta> lru_;  // front = least recently used
  std::unordered_map<kv::BlockKey, std::list<BlockMeta>::iterator> index_;
  LruTierCounters counters_;
  // Write model (0 = writes are free).
  double write_s_per_block_ = 0;
  Nanos max_write_backlog_{0};
  Nanos now_{0};
  Nanos write_free_at_{0};
};

}  // namespace kvroute::engine
