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

std::vector<kv::KvEvent> InProcessSharedStore::TakeEvents() { return std::exchange(events_, {}); }

void InProcessSharedStore::Restart() {
  core_ = StoreCore(core_.options());
  events_.emplace_back(std::in_place_type<kv::AllBlocksCleared>);
}

}  // namespace kvroute::store
