// SharedKvStore: the engine's view of the cluster's shared KV store (the fourth tier, one per
// cluster: `kvroute store`, src/store/). The engine only asks and offers; the store owns
// capacity, LRU and TTL, and publishes the shared tier's KV events itself (medium "SHARED"),
// once for all workers, so an engine never announces shared blocks.
//
// Policy (README.md "KV tiers"): write-through. Every block an engine computes and caches on
// GPU is offered to the store in the same step, as vLLM's OffloadingConnector stores each
// newly full block every step (`_get_reqs_to_store`) and LMCache uploads asynchronously to
// its remote backend: a conversation is then loadable by every worker while its first holder
// still has it, which is what a shared tier is for. Offers are fire-and-forget: a store that
// is down or slow loses them, never the engine's step loop.
//
// Leases: when a request queues, the engine leases the store's run of its prefix (all of it:
// a local block evicted while the request waits is then read from the store), and releases
// it when the request is scheduled (the blocks are read) or dropped, so the blocks the router
// credited are not evicted while the request queues (store/store_core.h). An implementation
// without leases returns 0 and ignores releases.
//
// Implementations: store::InProcessSharedStore (the simulator, virtual time) and the sim's
// TCP client (sim/store_client.h). Thread safety: the engine calls from its owner thread only;
// an implementation shared by several engines must be safe for that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/types.h"
#include "engine/block_meta.h"
#include "kv/kv_event.h"

namespace kvroute::engine {

class SharedKvStore {
 public:
  virtual ~SharedKvStore() = default;
  // How many of `hashes` (one sequence's consecutive block hashes), from the first, the store
  // holds now; those are marked used. 0 when the store cannot be reached.
  virtual std::size_t Match(std::span<const kv::EngineHash> hashes, Nanos now) = 0;
  // Offers newly computed blocks (each with parent hash and payload). Never blocks.
  virtual void Put(std::span<const BlockMeta> blocks, Nanos now) = 0;
  // Leases each of `hashes` the store holds (not only a run from the first); returns the
  // lease id, 0 when nothing was leased (or the store cannot be reached).
  virtual std::uint64_t Lease(std::span<const kv::EngineHash> /*hashes*/, Nanos /*now*/) {
    return 0;
  }
  // Ends a lease from Lease (never blocks; an unknown id is ignored).
  virtual void Release(std::uint64_t /*lease_id*/, Nanos /*now*/) {}
};

}  // namespace kvroute::engine
