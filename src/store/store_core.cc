#include "store/store_core.h"

namespace kvroute::store {

StoreCore::StoreCore(StoreOptions options)
    : options_(options), next_lease_id_(options.first_lease_id == 0 ? 1 : options.first_lease_id) {}

void StoreCore::Remove(EntryIt it, std::vector<kv::KvEvent>* events) {
  events->push_back(kv::BlockRemoved{
      .block_hashes = {it->block.meta.hash}, .medium = std::string("SHARED"), .group_idx = 0});
  used_bytes_ -= it->block.size_bytes;
  index_.erase(it->block.meta.hash);
  lru_.erase(it);
}

void StoreCore::Touch(EntryIt it, Nanos now) {
  it->last_use = now;
  // A leased block keeps its place in pinned_; it rejoins the LRU order when released.
  if (it->pins == 0) lru_.splice(lru_.end(), lru_, it);
}

void StoreCore::Unpin(EntryIt it, Nanos now) {
  if (--it->pins > 0) return;
  // Back in the LRU order as just used: `now` is the latest time seen, so the order holds.
  it->last_use = now;
  lru_.splice(lru_.end(), pinned_, it);
}

void StoreCore::EndLease(std::uint64_t id, Nanos now) {
  auto lease = leases_.find(id);
  for (kv::EngineHash h : lease->second.hashes) {
    // A leased block cannot be removed, so each is still indexed.
    Unpin(index_.at(h), now);
  }
  leases_.erase(lease);
}

void StoreCore::Expire(Nanos now, std::vector<kv::KvEvent>* events) {
  while (!lease_expiry_.empty() && lease_expiry_.front().first <= now) {
    const std::uint64_t id = lease_expiry_.front().second;
    lease_expiry_.pop_front();
    if (leases_.contains(id)) {
      EndLease(id, now);
      ++counters_.leases_expired;
    }
  }
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
    Touch(it->second, now);
  }
  counters_.hit_blocks += n;
  return n;
}

LeaseGrant StoreCore::Lease(std::span<const kv::EngineHash> hashes, Nanos now,
                            std::vector<kv::KvEvent>* events) {
  Expire(now, events);
  LeaseRecord record;
  for (kv::EngineHash h : hashes) {
    auto it = index_.find(h);
    if (it == index_.end()) continue;  // a gap may be a block the engine holds locally
    EntryIt e = it->second;
    e->last_use = now;
    if (e->pins++ == 0) pinned_.splice(pinned_.end(), lru_, e);
    record.hashes.push_back(h);
  }
  if (record.hashes.empty()) return {};
  const std::uint64_t id = next_lease_id_++;
  const std::size_t blocks = record.hashes.size();
  record.expires = now + options_.lease_ttl;
  lease_expiry_.emplace_back(record.expires, id);
  leases_.emplace(id, std::move(record));
  ++counters_.leases;
  counters_.leased_blocks += blocks;
  return {.id = id, .blocks = blocks};
}

bool StoreCore::Release(std::uint64_t lease_id, Nanos now) {
  if (!leases_.contains(lease_id)) return false;
  EndLease(lease_id, now);
  ++counters_.leases_released;
  return true;
}

void StoreCore::Put(std::span<const StoredBlock> blocks, Nanos now,
                    std::vector<kv::KvEvent>* events) {
  Expire(now, events);
  for (const StoredBlock& b : blocks) {
    ++counters_.puts;
    if (auto it = index_.find(b.meta.hash); it != index_.end()) {
      Touch(it->second, now);
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
    if (used_bytes_ + b.size_bytes > options_.capacity_bytes) {
      ++counters_.refused_full;  // what is left is leased
      continue;
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
  out.reserve(index_.size());
  for (const Entry& e : lru_) out.push_back(e.block.meta.hash);
  for (const Entry& e : pinned_) out.push_back(e.block.meta.hash);
  return out;
}

}  // namespace kvroute::store
