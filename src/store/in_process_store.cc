#include "store/in_process_store.h"

#include <utility>

namespace kvroute::store {

InProcessSharedStore::InProcessSharedStore(StoreOptions options, double block_bytes)
    : core_(options), block_bytes_(block_bytes) {}

std::size_t InProcessSharedStore::Match(std::span<const kv::EngineHash> hashes, Nanos now) {
  return core_.Match(hashes, now, &events_);
}

void InProcessSharedStore::Put(std::span<const engine::BlockMeta> blocks, Nanos now) {
  scratch_.clear();
  for (const engine::BlockMeta& b : blocks) {
    scratch_.push_back(StoredBlock{.meta = b, .size_bytes = block_bytes_});
  }
  core_.Put(scratch_, now, &events_);
}

std::uint64_t InProcessSharedStore::Lease(std::span<const kv::EngineHash> hashes, Nanos now) {
  return core_.Lease(hashes, now, &events_).id;
}

void InProcessSharedStore::Release(std::uint64_t lease_id, Nanos now) {
  core_.Release(lease_id, now);
}

std::vector<kv::KvEvent> InProcessSharedStore::TakeEvents() { return std::exchange(events_, {}); }

void InProcessSharedStore::Restart() {
  // Lease ids go on from the old life's, so a lease taken before the restart matches none.
  StoreOptions options = core_.options();
  options.first_lease_id = core_.next_lease_id();
  core_ = StoreCore(options);
  events_.emplace_back(std::in_place_type<kv::AllBlocksCleared>);
}

}  // namespace kvroute::store
