// PredictedBlocks: kvroute's own record of where it routed which prefix, for two uses.
//
//  1. Approximate mode (engines without KV events): the only view of what each worker caches.
//     Capacity per worker in blocks (learn it from vllm:cache_config_info num_gpu_blocks) and a
//     long TTL (Dynamo uses 120 s) bound how long a guess lives.
//  2. Predict-on-route overlay on the event index: a short TTL (a few seconds) covers the gap
//     before the engine's BlockStored events arrive, so a burst of sibling requests sharing a
//     prefix lands on one worker instead of scattering (kv/index_overlay.h max-merges both).
//
// Per worker the blocks form an LRU list bounded by capacity. Record() inserts a prompt's
// keys tail first, so block 0 is the most recently used and eviction removes the tail first,
// as vLLM does; recording a prefix again refreshes both recency and expiry.
// No clock is read inside: callers pass `now` (monotonic, non-decreasing across calls).
//
// Ownership: owns its state. Thread safety: all methods are safe to call concurrently (one
// internal mutex; this structure sees one Record per routed request, not per engine event).
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/types.h"
#include "kv/block_key.h"

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

  // Each worker with an unexpired keys[0], with its consecutive unexpired depth. Order
  // unspecified.
  std::vector<PredictedMatch> Lookup(std::span<const BlockKey> keys, Nanos now) const;

  void RemoveWorker(WorkerId worker);

  // Drops every block expired at `now` (Record also does it for the worker it touches).
  void Expire(Nanos now);

  // Blocks recorded over all workers (expired ones included until dropped).
  std::size_t size() const;

 private:
  struct Item {
    BlockKey key;
    Nanos expiry;
  };
  struct WorkerBlocks {
    std::size_t capacity = 0;
    std::list<Item> lru;  // front = most recent; expiries non-increasing from the front
    std::unordered_map<BlockKey, std::list<Item>::iterator> where;
  };

  // REQUIRES: mu_ held.
  WorkerBlocks& Get(WorkerId worker);
  void EvictBack(WorkerId worker, WorkerBlocks& w);
  void ExpireWorker(WorkerId worker, WorkerBlocks& w, Nanos now);

  const PredictedOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<WorkerId, WorkerBlocks> workers_;
  // Which workers hold each key, so lookups start from keys[0]'s holders only.
  std::unordered_map<BlockKey, std::vector<WorkerId>> holders_;
  std::size_t size_ = 0;
};

}  // namespace kvroute::kv
