#include "engine/cpu_tier.h"

namespace kvroute::engine {

CpuTier::CpuTier(std::int64_t capacity_blocks, std::uint32_t block_size)
    : capacity_(capacity_blocks < 0 ? 0 : capacity_blocks), block_size_(block_size) {}

const BlockMeta* CpuTier::Find(kv::BlockKey key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &*it->second;
}

void CpuTier::Touch(kv::BlockKey key) {
  auto it = index_.find(key);
  if (it != index_.end()) lru_.splice(lru_.end(), lru_, it->second);
}

void CpuTier::Insert(const BlockMeta& meta, std::vector<kv::KvEvent>* events) {
  if (capacity_ == 0) return;
  if (index_.contains(meta.key)) {
    Touch(meta.key);
    return;
  }
  if (size() >= capacity_) {
    const BlockMeta& victim = lru_.front();
    events->push_back(kv::BlockRemoved{
        .block_hashes = {victim.hash}, .medium = std::string("CPU"), .group_idx = 0});
    index_.erase(victim.key);
    lru_.pop_front();
  }
  lru_.push_back(meta);
  index_[meta.key] = std::prev(lru_.end());
  events->push_back(BlockStoredOf(lru_.back(), block_size_, "CPU"));
}

void CpuTier::Clear() {
  lru_.clear();
  index_.clear();
}

std::vector<kv::EngineHash> CpuTier::Hashes() const {
  std::vector<kv::EngineHash> out;
  out.reserve(lru_.size());
  for (const BlockMeta& m : lru_) out.push_back(m.hash);
  return out;
}

}  // namespace kvroute::engine
