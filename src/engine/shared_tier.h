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
// Implementations: store::InProcessSharedStore (the simulator, virtual time) and the sim's
// TCP client (sim/store_client.h). Thread safety: the engine calls from its owner thread only;
// an implementation shared by several engines must be safe for that.
#pragma once

#include <cstddef>
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
};

}  // namespace kvroute::engine
