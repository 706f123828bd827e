#include "engine/block_pool.h"

#include <cassert>

namespace kvroute::engine {

BlockPool::BlockPool(std::int64_t num_blocks, std::uint32_t block_size, CpuTier* cpu_tier)
    : block_size_(block_size), cpu_tier_(cpu_tier), blocks_(num_blocks < 0 ? 0 : num_blocks) {
  for (BlockId id = 0; id < static_cast<BlockId>(blocks_.size()); ++id) PushBack(id);
}

std::optional<BlockId> BlockPool::Lookup(kv::BlockKey key) const {
  auto it = cached_.find(key);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::Touch(BlockId id) {
  Block& b = blocks_[id];
  if (b.ref_count == 0) Unlink(id);
  ++b.ref_count;
}

bool BlockPool::Allocate(std::int64_t n, std::vector<kv::KvEvent>* events,
                         std::vector<BlockId>* out) {
  if (n > num_free_) return false;
  for (std::int64_t i = 0; i < n; ++i) {
    const BlockId id = head_;
    assert(id != kNone);
    Unlink(id);
    if (blocks_[id].cached) Evict(id, events);
    blocks_[id].ref_count = 1;
    out->push_back(id);
  }
  return true;
}

void BlockPool::Free(std::span<const BlockId> ids) {
  for (BlockId id : ids) {
    Block& b = blocks_[id];
    assert(b.ref_count > 0);
    if (--b.ref_count == 0) {
      // An uncached block holds nothing reusable: vLLM returns it to the free queue too
      // (its data is simply overwritten first come first served, like any free block).
      PushBack(id);
    }
  }
}

bool BlockPool::Cache(BlockId id, BlockMeta meta) {
  Block& b = blocks_[id];
  assert(!b.cached);
  if (cached_.contains(meta.key)) return false;
  cached_.emplace(meta.key, id);
  b.cached = true;
  b.meta = std::move(meta);
  return true;
}

void BlockPool::Evict(BlockId id, std::vector<kv::KvEvent>* events) {
  Block& b = blocks_[id];
  // Offload before announcing the GPU removal, so a consumer never sees a gap in which the
  // block is held nowhere.
  if (cpu_tier_ != nullptr) cpu_tier_->Insert(b.meta, events);
  events->push_back(kv::BlockRemoved{
      .block_hashes = {b.meta.hash}, .medium = std::string("GPU"), .group_idx = 0});
  cached_.erase(b.meta.key);
  b.cached = false;
  b.meta = BlockMeta{};
}

void BlockPool::ClearCache() {
  for (auto& [key, id] : cached_) {
    blocks_[id].cached = false;
    blocks_[id].meta = BlockMeta{};
  }
  cached_.clear();
}

std::vector<kv::EngineHash> BlockPool::CachedHashes() const {
  std::vector<kv::EngineHash> out;
  out.reserve(cached_.size());
  for (const auto& [key, id] : cached_) out.push_back(blocks_[id].meta.hash);
  return out;
}

void BlockPool::PushBack(BlockId id) {
  Block& b = blocks_[id];
  assert(!b.in_free_queue);
  b.prev = tail_;
  b.next = kNone;
  if (tail_ != kNone) blocks_[tail_].next = id;
  tail_ = id;
  if (head_ == kNone) head_ = id;
  b.in_free_queue = true;
  ++num_free_;
}

void BlockPool::Unlink(BlockId id) {
  Block& b = blocks_[id];
  assert(b.in_free_queue);
  if (b.prev != kNone)
    blocks_[b.prev].next = b.next;
  else
    head_ = b.next;
  if (b.next != kNone)
    blocks_[b.next].prev = b.prev;
  else
    tail_ = b.prev;
  b.prev = b.next = kNone;
  b.in_free_queue = false;
  --num_free_;
}

}  // namespace kvroute::engine
