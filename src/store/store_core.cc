#include "store/store_core.h"

namespace kvroute::store {

StoreCore::StoreCore(StoreOptions options) : options_(options) {}

void StoreCore::Remove(std::list<Entry>::iterator it, std::vector<kv::KvEvent>* events) {
  events->push_back(kv::BlockRemoved{
      .block_hashes = {it->block.meta.hash}, .medium = std::string("SHARED"), .group_idx = 0});
  used_bytes_ -= it->block.size_bytes;
  index_.erase(it->block.meta.hash);
  lru_.erase(it);
}

void StoreCore::Expire(Nanos now, std::vector<kv::KvEvent>* events) {
  if (options_.ttl <= Nanos(0)) return;
  while (!lru_.empty() && now - lru_.front().last_use >= options_.ttl) {
    Remove(lru_.begin(), events);
    ++counters_.expired;
  }
}

std::size_t StoreCore::Match(std::span<const kv::EngineHash> hashes, Nanos now,
                             std::vector<kv::KvEvent>* events) {
  Expire(now, events);
  ++counters_.lookups;
  counters_.queried_blocks += hashes.size();
  std::size_t n = 0;
  for (; n < hashes.size(); ++n) {
    auto it = index_.find(hashes[n]);
    if (it == index_.end()) break;
    it->second->last_use = now;
    lru_.splice(lru_.end(), lru_, it->second);
  }
  counters_.hit_blocks += n;
  return n;
}

void StoreCore::Put(std::span<const StoredBlock> blocks, Nanos now,
                    std::vector<kv::KvEvent>* events) {
  Expire(now, events);
  for (const StoredBlock& b : blocks) {
    ++counters_.puts;
    if (auto it = index_.find(b.meta.hash); it != index_.end()) {
      it->second->last_use = now;
      lru_.splice(lru_.end(), lru_, it->second);
      ++counters_.refreshed;
      continue;
    }
    if (b.size_bytes > options_.capacity_bytes) {
      ++counters_.rejected;
      continue;
    }
    while (!lru_.empty() && used_bytes_ + b.size_bytes > options_.capacity_bytes) {
      Remove(lru_.begin(), events);
      ++counters_.evicted;
    }
    lru_.push_back(Entry{.block = b, .last_use = now});
    index_[b.meta.hash] = std::prev(lru_.end());
    used_bytes_ += b.size_bytes;
    ++counters_.stored;
    events->push_back(engine::BlockStoredOf(b.meta, options_.block_size, "SHARED"));
  }
}

std::vector<kv::EngineHash> StoreCore::Hashes() const {
  std::vector<kv::EngineHash> out;
  out.reserve(lru_.size());
  for (const Entry& e : lru_) out.push_back(e.block.meta.hash);
  return out;
}

}  // namespace kvroute::store
