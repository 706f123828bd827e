// StoreCore: the shared KV tier's metadata — which block hashes the cluster's store holds, their
// sizes, when each was last used — with a capacity enforced by LRU and an idle TTL. It moves
// no bytes (the engine model charges the load time from the tier's bandwidth); it keeps each
// block's parent and tokens so it can announce the block in KV events, as an engine would.
//
// Events (medium "SHARED", kvroute's name: no vLLM connector publishes a cluster-wide tier; the
// index parses it, kv/kv_event.h): a newly stored block → BlockStored (one per block, with its
// parent); a block evicted for room or expired → BlockRemoved. A block offered again is only
// refreshed (no event). Deleting what it evicts is the point: llm-d's file connector never
// deletes, so its index credits blocks that are gone.
//
// Time is the caller's (`now`): the server passes the wall clock, the simulator virtual time.
// `now` must not go backwards (LRU order is last-use order, so TTL expiry pops from the front).
//
// Thread safety: none; the server guards it with a mutex, the simulator is one thread.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/types.h"
#include "engine/block_meta.h"
#include "kv/kv_event.h"

namespace kvroute::store {

struct StoreOptions {
  double capacity_bytes = 0;       // 0 = nothing is stored
  Nanos ttl{0};                    // idle time after which a block expires; 0 = never
  std::uint32_t block_size = 16;   // tokens per block (every put must match)
};

struct StoreCounters {
  std::uint64_t puts = 0;          // blocks offered
  std::uint64_t stored = 0;        // new blocks stored (BlockStored)
  std::uint64_t refreshed = 0;     // offered blocks already held
  std::uint64_t rejected = 0;      // a block larger than the whole store
  std::uint64_t evicted = 0;       // removed for room (LRU)
  std::uint64_t expired = 0;       // removed by the TTL
  std::uint64_t lookups = 0;       // Match calls
  std::uint64_t hit_blocks = 0;    // blocks Match found
  std::uint64_t queried_blocks = 0;
};

struct StoredBlock {
  engine::BlockMeta meta;  // hash, parent hash, payload (tokens, LoRA name, extra keys)
  double size_bytes = 0;
};

class StoreCore {
 public:
  explicit StoreCore(StoreOptions options);

  // How many of `hashes`, from the first, are held; those are marked used at `now`. Expires
  // first (so a block past its TTL is never reported).
  std::size_t Match(std::span<const kv::EngineHash> hashes, Nanos now,
                    std::vector<kv::KvEvent>* events);
  // Stores the blocks (evicting least recently used ones for room) and appends the events.
  void Put(std::span<const StoredBlock> blocks, Nanos now, std::vector<kv::KvEvent>* events);
  // Removes blocks idle for longer than the TTL.
  void Expire(Nanos now, std::vector<kv::KvEvent>* events);

  bool Contains(kv::EngineHash hash) const { return index_.contains(hash); }
  std::size_t size() const { return index_.size(); }
  double used_bytes() const { return used_bytes_; }
  const StoreOptions& options() const { return options_; }
  const StoreCounters& counters() const { return counters_; }
  // Held hashes, least recently used first (tests, the store's replay-free snapshot).
  std::vector<kv::EngineHash> Hashes() const;

 private:
  struct Entry {
    StoredBlock block;
    Nanos last_use{0};
  };
  void Remove(std::list<Entry>::iterator it, std::vector<kv::KvEvent>* events);

  StoreOptions options_;
  std::list<Entry> lru_;  // front = least recently used
  std::unordered_map<kv::EngineHash, std::list<Entry>::iterator> index_;
  double used_bytes_ = 0;
  StoreCounters counters_;
};

}  // namespace kvroute::store
