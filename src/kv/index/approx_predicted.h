// PredictedBlocks: kvroute's own record of where it routed which prefix, for two uses.
//
//  1. Approximate mode (engines without KV events): the only view of what each worker caches.
//     Capacity per worker in blocks (learn it from vllm:cache_config_info num_gpu_blocks) and a
//     long TTL (Dynamo uses 120 s) bound how long a guess lives.
//  2. Predict-on-route overlay on the event index: a short TTL (a few seconds) covers the gap
//     before the engine's BlockStored events arrive, so a burst of sibling requests sharing a
//     prefix lands on one worker instead of scattering (kv/index/index_overlay.h max-merges both).
//
// Per worker the blocks form an LRU list bounded by capacity. Record() inserts a prompt's
// keys tail first, so block 0 is the most recently used and eviction removes the tail first,
// as vLLM does; recording a prefix again refreshes both recency and expiry.
// No clock is read inside: callers pass `now` (monotonic, non-decreasing across calls).
//
// Layout (why flat): one Record per routed request touches every block of its prompt (~1,000
// at 15k tokens), so the structure allocates nothing per block. Every (worker, key) pair is
// an Entry in one array (freed entries are reused), linked into its worker's LRU list and
// into its key's holder list by 32-bit indices; two open-addressing tables (linear probing,
// backward-shift deletion, no tombstones) find the entry of a (key, worker) pair and the
// holder list of a key. Memory follows the peak number of recorded blocks (the arrays do not
// shrink). A key's holders stay in recording order, as the list-based version kept them.
//
// Ownership: owns its state. Thread safety: all methods are safe to call concurrently (one
// internal mutex; this structure sees one Record per routed request, not per engine event).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/types.h"
#include "kv/keys/block_key.h"

namespace kvroute::kv {

struct PredictedOptions {
  // How long a recorded block counts as cached. Approximate mode: ~120 s; overlay: ~5 s.
  Nanos ttl = std::chrono::seconds(120);
  // Per-worker capacity in blocks until SetCapacity() says otherwise.
  std::size_t default_capacity_blocks = 1 << 16;
};

struct PredictedMatch {
  WorkerId worker = 0;
  std::uint32_t depth = 0;  // consecutive prefix blocks predicted present
  bool operator==(const PredictedMatch&) const = default;
};

class PredictedBlocks {
 public:
  explicit PredictedBlocks(PredictedOptions options = {});
  PredictedBlocks(const PredictedBlocks&) = delete;
  PredictedBlocks& operator=(const PredictedBlocks&) = delete;

  // Sets the worker's capacity (0 disables recording for it); evicts down to it.
  void SetCapacity(WorkerId worker, std::size_t blocks);

  // The router sent a request whose full-block keys are `keys` to `worker` at `now`.
  void Record(WorkerId worker, std::span<const BlockKey> keys, Nanos now);

  // Each worker with an unexpired keys[0], with its consecutive unexpired depth, in the
  // order the workers first recorded keys[0] (callers must not rely on it).
  std::vector<PredictedMatch> Lookup(std::span<const BlockKey> keys, Nanos now) const;

  void RemoveWorker(WorkerId worker);

  // Drops every block expired at `now` (Record also does it for the worker it touches).
  void Expire(Nanos now);

  // Blocks recorded over all workers (expired ones included until dropped).
  std::size_t size() const;

 private:
  static constexpr std::uint32_t kNil = ~std::uint32_t{0};
  struct Entry {  // one (worker, key) pair
    BlockKey key = 0;
    Nanos expiry{0};
    WorkerId worker = 0;
    std::uint32_t newer = kNil;  // the worker's LRU list (kNil at its ends)
    std::uint32_t older = kNil;
    std::uint32_t prev_holder = kNil;  // the key's holder list, recording order
    std::uint32_t next_holder = kNil;
  };
  struct WorkerBlocks {
    std::size_t capacity = 0;
    std::size_t count = 0;
    std::uint32_t newest = kNil;  // expiries non-increasing from newest to oldest
    std::uint32_t oldest = kNil;
  };
  struct PairSlot {  // (key, worker) → entry; entry == kNil: empty
    std::uint32_t entry = kNil;
    std::uint32_t hash = 0;  // low 32 bits of the pair's hash: home slot and tag
  };
  struct KeySlot {  // key → its holder list; first == kNil: empty
    BlockKey key = 0;
    std::uint32_t first = kNil;
    std::uint32_t last = kNil;
  };

  // REQUIRES: mu_ held (all below).
  WorkerBlocks& Get(WorkerId worker);
  std::uint32_t FindEntry(BlockKey key, WorkerId worker) const;
  std::size_t FindKeySlot(BlockKey key) const;  // its slot, or the empty slot that ends the probe
  void AddEntry(WorkerBlocks& w, WorkerId worker, BlockKey key, Nanos expiry);
  void PushFront(WorkerBlocks& w, std::uint32_t e);    // e is in no list
  void MoveToFront(WorkerBlocks& w, std::uint32_t e);  // e is in w's list
  void Unlink(WorkerBlocks& w, std::uint32_t e);
  void EvictOldest(WorkerBlocks& w);
  void ExpireWorker(WorkerBlocks& w, Nanos now);
  void InsertPair(std::uint32_t e);
  void ErasePair(std::uint32_t e);
  void AddHolder(std::uint32_t e);
  void RemoveHolder(std::uint32_t e);
  void GrowPairs();
  void GrowKeys();

  const PredictedOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<WorkerId, WorkerBlocks> workers_;
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> free_entries_;
  std::vector<PairSlot> pairs_;  // size a power of two (or 0), at most 3/4 full
  std::size_t pairs_used_ = 0;
  std::vector<KeySlot> keys_;  // size a power of two (or 0), at most 3/4 full
  std::size_t keys_used_ = 0;
  std::size_t size_ = 0;
};

}  // namespace kvroute::kv
