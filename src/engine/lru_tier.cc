#include "engine/lru_tier.h"

#include <algorithm>

namespace kvroute::engine {

LruTier::LruTier(std::int64_t capacity_blocks, std::uint32_t block_size, std::string medium,
                 LruTier* spill)
    : capacity_(capacity_blocks < 0 ? 0 : capacity_blocks),
      block_size_(block_size),
      medium_(std::move(medium)),
      spill_(spill) {}

void LruTier::SetWriteModel(double bytes_per_block, double write_bytes_per_s,
                            Nanos max_write_backlog) {
  write_s_per_block_ = write_bytes_per_s > 0 ? bytes_per_block / write_bytes_per_s : 0;
  max_write_backlog_ = max_write_backlog;
}

bool LruTier::AdmitWrite() {
  if (write_s_per_block_ <= 0) return true;
  const Nanos start = std::max(now_, write_free_at_);
  if (start - now_ > max_write_backlog_) {
    ++counters_.dropped_writes;
    return false;
  }
  write_free_at_ = start + FromSeconds(write_s_per_block_);
  return true;
}

const BlockMeta* LruTier::Find(kv::BlockKey key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &*it->second;
}

void LruTier::Touch(kv::BlockKey key) {
  auto it = index_.find(key);
  if (it != index_.end()) lru_.splice(lru_.end(), lru_, it->second);
}

void LruTier::Insert(const BlockMeta& meta, std::vector<kv::KvEvent>* events) {
  if (capacity_ == 0) return;
  if (index_.contains(meta.key)) {
    Touch(meta.key);
    return;
  }
  if (!AdmitWrite()) return;
  if (size() >= capacity_) {
    const BlockMeta& victim = lru_.front();
    // Spill before announcing the removal, so a consumer never sees the block held nowhere.
    if (spill_ != nullptr) spill_->Insert(victim, events);
    events->push_back(
        kv::BlockRemoved{.block_hashes = {victim.hash}, .medium = medium_, .group_idx = 0});
    index_.erase(victim.key);
    lru_.pop_front();
    ++counters_.evicted;
  }
  lru_.push_back(meta);
  index_[meta.key] = std::prev(lru_.end());
  ++counters_.stored;
  events->push_back(BlockStoredOf(lru_.back(), block_size_, medium_.c_str()));
}

void LruTier::Clear() {
  lru_.clear();
  index_.clear();
}

std::vector<kv::EngineHash> LruTier::Hashes() const {
  std::vector<kv::EngineHash> out;
  out.reserve(lru_.size());
  for (const BlockMeta& m : lru_) out.push_back(m.hash);
  return out;
}

}  // namespace kvroute::engine
