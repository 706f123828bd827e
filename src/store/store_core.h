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
// Leases. An engine leases the store's run of a queued request's prefix when the request
// arrives, and releases it when the request is scheduled (the blocks are then read) or
// dropped: a leased block is never evicted or expired, so what the router credited when it
// chose this worker is still there when the engine looks (Mooncake Store's master likewise
// grants a lease, `default_kv_lease_ttl` 5 s, during which an object is not evicted; its lease
// covers a read in flight, ours the queue wait before it, hence a longer default). A lease
// ends by itself after `lease_ttl` (an engine that died never releases). When every held
// block is leased a new block finds no room and is refused, counted: a full store never
// blocks a writer.
//
// Time is the caller's (`now`): the server passes the wall clock, the simulator virtual time.
// `now` must not go backwards (LRU order is last-use order, so TTL expiry pops from the front).
//
// Thread safety: none; the server guards it with a mutex, the simulator is one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
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
  Nanos lease_ttl{std::chrono::seconds(60)};  // a lease not released by then ends by itself
  // The first lease id; the server starts each life at a different one so an engine's lease
  // from before a restart never releases someone else's.
  std::uint64_t first_lease_id = 1;
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
  std::uint64_t leases = 0;          // leases granted (at least one block)
  std::uint64_t leased_blocks = 0;   // blocks pinned by those leases
  std::uint64_t leases_released = 0;
  std::uint64_t leases_expired = 0;  // ended by lease_ttl, not released
  std::uint64_t refused_full = 0;    // new blocks refused: every held block is leased
};

struct LeaseGrant {
  std::uint64_t id = 0;     // 0: nothing leased (no block of the run is held)
  std::size_t blocks = 0;   // how many of the hashes are held and now leased
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
  // Leases each of `hashes` the store holds (not only the run from the first, as Match
  // counts: a gap may be a block the engine holds locally, with the store's run after it),
  // and marks them used: they are not evicted or expired until Release(id) or `lease_ttl`.
  // A hash repeated in `hashes` is leased once per occurrence (and unpinned as often).
  LeaseGrant Lease(std::span<const kv::EngineHash> hashes, Nanos now,
                   std::vector<kv::KvEvent>* events);
  // Ends a lease (an unknown or ended id is ignored); its blocks count as used at `now`.
  // Returns whether the lease was live.
  bool Release(std::uint64_t lease_id, Nanos now);
  // Ends leases past `lease_ttl`, then removes blocks idle for longer than the TTL.
  void Expire(Nanos now, std::vector<kv::KvEvent>* events);

  bool Contains(kv::EngineHash hash) const { return index_.contains(hash); }
  std::size_t size() const { return index_.size(); }
  std::size_t leased_size() const { return pinned_.size(); }  // blocks under a lease
  std::size_t live_leases() const { return leases_.size(); }
  std::uint64_t next_lease_id() const { return next_lease_id_; }
  double used_bytes() const { return used_bytes_; }
  const StoreOptions& options() const { return options_; }
  const StoreCounters& counters() const { return counters_; }
  // Held hashes, least recently used first, then the leased ones (tests).
  std::vector<kv::EngineHash> Hashes() const;

 private:
  struct Entry {
    StoredBlock block;
    Nanos last_use{0};
    std::uint32_t pins = 0;  // live leases holding it; > 0 ⇒ in pinned_, not lru_
  };
  using EntryIt = std::list<Entry>::iterator;
  struct LeaseRecord {
    std::vector<kv::EngineHash> hashes;
    Nanos expires{0};
  };
  void Remove(EntryIt it, std::vector<kv::KvEvent>* events);
  void Touch(EntryIt it, Nanos now);
  void Unpin(EntryIt it, Nanos now);
  void EndLease(std::uint64_t id, Nanos now);

  StoreOptions options_;
  std::list<Entry> lru_;     // unleased blocks, front = least recently used (last_use order)
  std::list<Entry> pinned_;  // leased blocks: never evicted or expired
  std::unordered_map<kv::EngineHash, EntryIt> index_;  // both lists
  std::unordered_map<std::uint64_t, LeaseRecord> leases_;
  // Live leases in grant order; lease_ttl is fixed and `now` never goes back, so this is also
  // expiry order. Released ids stay until they reach the front (skipped then).
  std::deque<std::pair<Nanos, std::uint64_t>> lease_expiry_;
  std::uint64_t next_lease_id_;
  double used_bytes_ = 0;
  StoreCounters counters_;
};

}  // namespace kvroute::store
