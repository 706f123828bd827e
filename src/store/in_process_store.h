// InProcessSharedStore: the shared tier for `kvroute simulate` (virtual time) and tests — the
// engine's SharedKvStore over a StoreCore in the same process, with no I/O. The events the
// store emits (medium "SHARED") queue here until the owner drains them into its index, as the
// router would receive them from `kvroute store`'s ZMQ publisher.
//
// Thread safety: none (the simulator's one thread); every engine sharing it runs there.
#pragma once

#include <vector>

#include "engine/shared_tier.h"
#include "store/store_core.h"

namespace kvroute::store {

class InProcessSharedStore : public engine::SharedKvStore {
 public:
  // `block_bytes`: the size of one block in the store (KV bytes of block_size tokens).
  InProcessSharedStore(StoreOptions options, double block_bytes);

  std::size_t Match(std::span<const kv::EngineHash> hashes, Nanos now) override;
  void Put(std::span<const engine::BlockMeta> blocks, Nanos now) override;
  std::uint64_t Lease(std::span<const kv::EngineHash> hashes, Nanos now) override;
  void Release(std::uint64_t lease_id, Nanos now) override;

  // Events since the last call, in order.
  std::vector<kv::KvEvent> TakeEvents();
  // Forgets everything and queues AllBlocksCleared (a store restarting empty).
  void Restart();
  const StoreCore& core() const { return core_; }
  StoreCore& core() { return core_; }

 private:
  StoreCore core_;
  double block_bytes_;
  std::vector<kv::KvEvent> events_;
  std::vector<StoredBlock> scratch_;
};

}  // namespace kvroute::store
