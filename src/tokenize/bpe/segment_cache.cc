#include "tokenize/bpe/segment_cache.h"

#include <xxhash.h>

namespace kvroute::tokenize {

SegmentCache::SegmentCache(std::size_t max_tokens)
    : max_tokens_per_shard_(std::max<std::size_t>(1, max_tokens / kShards)) {}

SegmentCache::Key SegmentCache::HashOf(std::string_view segment) {
  const XXH128_hash_t h = XXH3_128bits(segment.data(), segment.size());
  return Key{h.low64, h.high64};
}

bool SegmentCache::Lookup(std::string_view segment, std::vector<TokenId>* out) {
  const Key key = HashOf(segment);
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mu);
  auto it = shard.map.find(key);
  if (it == shard.map.end()) {
    ++shard.misses;
    return false;
  }
  ++shard.hits;
  shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
  const auto& ids = it->second->ids;
  out->insert(out->end(), ids.begin(), ids.end());
  return true;
}

void SegmentCache::Insert(std::string_view segment, const TokenId* ids, std::size_t n) {
  if (n > max_tokens_per_shard_) return;
  const Key key = HashOf(segment);
  Shard& shard = ShardOf(key);
  std::vector<TokenId> copy(ids, ids + n);  // copied outside the lock
  std::lock_guard lock(shard.mu);
  if (shard.map.contains(key)) return;  // another thread inserted the same segment
  shard.lru.push_front(Entry{key, std::move(copy)});
  shard.map.emplace(key, shard.lru.begin());
  shard.tokens += n;
  while (shard.tokens > max_tokens_per_shard_) {
    Entry& victim = shard.lru.back();
    shard.tokens -= victim.ids.size();
    shard.map.erase(victim.key);
    shard.lru.pop_back();
    ++shard.evictions;
  }
}

SegmentCache::Stats SegmentCache::GetStats() const {
  Stats s;
  for (const Shard& shard : shards_) {
    std::lock_guard lock(shard.mu);
    s.hits += shard.hits;
    s.misses += shard.misses;
    s.evictions += shard.evictions;
    s.entries += shard.map.size();
    s.tokens += shard.tokens;
  }
  return s;
}

}  // namespace kvroute::tokenize
