// BlockPool: the GPU tier of the paged KV cache — a fixed number of blocks, reference counts,
// the prefix-cache map (BlockKey → block), and vLLM V1's free queue.
//
// vLLM semantics reproduced (vllm/v1/core/block_pool.py, kv_cache_utils.py):
//   - Every block with ref_count 0 sits in one LRU free queue, cached or not. Allocation takes
//     from the front; a cached block taken there is evicted (its key forgotten, BlockRemoved
//     "GPU" emitted — and, with a CPU tier, the block is copied there first).
//   - Blocks are returned to the tail of the queue in the order Free() is given them; the
//     caller frees a request's blocks tail first, so a sequence's tail is evicted before its
//     head (the head is the most likely to be shared).
//   - A prefix hit on a free cached block takes it out of the queue (Touch); finishing a
//     request does not evict anything: its full blocks stay cached until space is needed.
//   - Two requests that compute the same block at once: the first one caches it; the other's
//     copy stays uncached (no event), so the index never sees one hash stored twice.
//
// The prefix-cache map is a flat open-addressing table of block ids (linear probing,
// backward-shift deletion), sized once to at least twice the block count: a 1,000-worker
// simulation evicts and caches a block per computed block once the caches are full, and a
// node-based map there cost a hash division and a pointer chase per call.
//
// Ownership: owns block metadata; the offload LruTier (optional) is owned by the caller and must
// outlive the pool. Thread safety: none (the engine's single owner thread).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/block_meta.h"
#include "engine/lru_tier.h"
#include "kv/kv_event.h"

namespace kvroute::engine {

using BlockId = std::int32_t;

class BlockPool {
 public:
  // `cpu_tier`: the tier evictions are offloaded to (host memory, or disk without one); may
  // be null (no lower local tier).
  BlockPool(std::int64_t num_blocks, std::uint32_t block_size, LruTier* cpu_tier);

  std::int64_t num_blocks() const { return static_cast<std::int64_t>(blocks_.size()); }
  // Blocks with ref_count 0, cached or not: what Allocate can hand out.
  std::int64_t num_free() const { return num_free_; }
  std::int64_t num_used() const { return num_blocks() - num_free_; }
  std::int64_t num_cached() const { return num_cached_; }
  std::uint64_t num_evicted() const { return num_evicted_; }  // cached blocks evicted so far
  int ref_count(BlockId id) const { return blocks_[id].ref_count; }
  bool is_cached(BlockId id) const { return blocks_[id].cached; }

  // The GPU block caching `key`, if any. Does not change LRU order.
  std::optional<BlockId> Lookup(kv::BlockKey key) const;

  // Takes a reference on a cached block (prefix hit); a free one leaves the free queue.
  void Touch(BlockId id);

  // Takes `n` blocks from the front of the free queue, evicting cached ones (events appended
  // to *events). Returns false and changes nothing when fewer than n are free.
  bool Allocate(std::int64_t n, std::vector<kv::KvEvent>* events, std::vector<BlockId>* out);

  // Drops one reference on each block, in order; blocks reaching 0 go to the free-queue tail.
  void Free(std::span<const BlockId> ids);

  // Registers `id` (which holds `meta.key`'s data) in the prefix cache. Returns false, and
  // leaves the block uncached, when another block already caches that key.
  bool Cache(BlockId id, BlockMeta meta);

  const BlockMeta& meta(BlockId id) const { return blocks_[id].meta; }

  // Forgets every cached key (vLLM reset_prefix_cache). No events: the caller emits
  // AllBlocksCleared. Blocks in use stay allocated.
  void ClearCache();

  std::vector<kv::EngineHash> CachedHashes() const;

 private:
  static constexpr BlockId kNone = -1;
  struct Block {
    int ref_count = 0;
    bool cached = false;
    bool in_free_queue = false;
    BlockId prev = kNone;  // free-queue links
    BlockId next = kNone;
    BlockMeta meta;
  };

  struct Slot {  // id == kNone: empty
    BlockId id = kNone;
    std::uint32_t hash = 0;  // low 32 bits of the key's hash: home slot and tag
  };
  // The slot holding `key`, or the empty slot that ends its probe.
  std::size_t FindSlot(kv::BlockKey key, std::uint32_t hash) const;
  void EraseKey(kv::BlockKey key);

  void PushBack(BlockId id);
  void Unlink(BlockId id);
  void Evict(BlockId id, std::vector<kv::KvEvent>* events);

  std::uint32_t block_size_;
  LruTier* cpu_tier_;  // where evicted blocks are offloaded (host, else disk); may be null
  std::uint64_t num_evicted_ = 0;
  std::vector<Block> blocks_;
  BlockId head_ = kNone;  // least recently freed: evicted first
  BlockId tail_ = kNone;
  std::int64_t num_free_ = 0;
  std::vector<Slot> table_;  // prefix cache: key → block; size a power of two >= 2 × blocks
  std::int64_t num_cached_ = 0;
};

}  // namespace kvroute::engine
