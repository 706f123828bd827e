#include "engine/block_pool.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace kvroute::engine {
namespace {

// splitmix64's finalizer: keys in tests are small integers.
std::uint32_t KeyHash(kv::BlockKey key) {
  std::uint64_t x = key;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return static_cast<std::uint32_t>(x ^ (x >> 31));
}

}  // namespace

BlockPool::BlockPool(std::int64_t num_blocks, std::uint32_t block_size, LruTier* cpu_tier)
    : block_size_(block_size), cpu_tier_(cpu_tier), blocks_(num_blocks < 0 ? 0 : num_blocks) {
  for (BlockId id = 0; id < static_cast<BlockId>(blocks_.size()); ++id) PushBack(id);
  // At most half full: every cached key is a distinct block.
  table_.resize(std::bit_ceil(std::max<std::size_t>(16, 2 * blocks_.size())));
}

std::size_t BlockPool::FindSlot(kv::BlockKey key, std::uint32_t hash) const {
  const std::size_t mask = table_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = table_[i];
    if (s.id == kNone || (s.hash == hash && blocks_[s.id].meta.key == key)) return i;
  }
}

void BlockPool::EraseKey(kv::BlockKey key) {
  const std::size_t mask = table_.size() - 1;
  std::size_t i = FindSlot(key, KeyHash(key));
  if (table_[i].id == kNone) return;
  // Backward-shift deletion: later members of the probe run move back unless their home
  // lies cyclically in (i, j].
  for (std::size_t j = (i + 1) & mask; table_[j].id != kNone; j = (j + 1) & mask) {
    const std::size_t h = table_[j].hash & mask;
    const bool stays = i < j ? (h > i && h <= j) : (h > i || h <= j);
    if (stays) continue;
    table_[i] = table_[j];
    i = j;
  }
  table_[i] = Slot{};
  --num_cached_;
}

std::optional<BlockId> BlockPool::Lookup(kv::BlockKey key) const {
  const Slot& s = table_[FindSlot(key, KeyHash(key))];
  if (s.id == kNone) return std::nullopt;
  return s.id;
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
  const std::uint32_t hash = KeyHash(meta.key);
  Slot& s = table_[FindSlot(meta.key, hash)];
  if (s.id != kNone) return false;
  s = Slot{id, hash};
  ++num_cached_;
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
  EraseKey(b.meta.key);
  b.cached = false;
  b.meta = BlockMeta{};
  ++num_evicted_;
}

void BlockPool::ClearCache() {
  for (Block& b : blocks_) {
    if (!b.cached) continue;
    b.cached = false;
    b.meta = BlockMeta{};
  }
  std::fill(table_.begin(), table_.end(), Slot{});
  num_cached_ = 0;
}

std::vector<kv::EngineHash> BlockPool::CachedHashes() const {
  std::vector<kv::EngineHash> out;
  out.reserve(static_cast<std::size_t>(num_cached_));
  for (const Block& b : blocks_) {
    if (b.cached) out.push_back(b.meta.hash);
  }
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
