// SegmentCache: a bounded, sharded LRU map from a text segment (the text between two added
// tokens) to its token ids.
//
// Why it is exact: added tokens are cuts — the ids of a segment depend on its bytes only, never
// on what comes before or after it — so a cached segment is reused verbatim. Turn k+1 of a
// conversation re-renders the whole prompt, but every earlier message is a segment already in
// the cache, so only the new turn is BPE-encoded.
//
// Keys are XXH3 128-bit hashes of the bytes (a collision needs ~2^64 distinct segments); the
// text itself is not stored, which keeps memory to the ids.
//
// Bound: `max_tokens` ids in total (split evenly across shards), least recently used first out.
//
// Thread safety: all methods are safe to call concurrently; each of the 16 shards has its own
// mutex, held only for a hash-map lookup or insert (never while encoding).
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/types.h"

namespace kvroute::tokenize {

class SegmentCache {
 public:
  struct Stats {
    std::uint64_t hits = 0, misses = 0, evictions = 0;
    std::size_t entries = 0, tokens = 0;
  };

  explicit SegmentCache(std::size_t max_tokens);
  SegmentCache(const SegmentCache&) = delete;
  SegmentCache& operator=(const SegmentCache&) = delete;

  // Appends the cached ids of `segment` to *out and returns true, or returns false.
  bool Lookup(std::string_view segment, std::vector<TokenId>* out);

  // Stores the ids of `segment` (a segment with more ids than a shard holds is not stored).
  void Insert(std::string_view segment, const TokenId* ids, std::size_t n);

  Stats GetStats() const;

 private:
  struct Key {
    std::uint64_t lo, hi;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const { return k.lo; }
  };
  struct Entry {
    Key key;
    std::vector<TokenId> ids;
  };
  static constexpr std::size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    std::list<Entry> lru;  // front = most recently used; guarded by mu
    std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> map;  // guarded by mu
    std::size_t tokens = 0;                                            // guarded by mu
    std::uint64_t hits = 0, misses = 0, evictions = 0;                 // guarded by mu
  };

  static Key HashOf(std::string_view segment);
  Shard& ShardOf(const Key& key) { return shards_[key.hi % kShards]; }

  const std::size_t max_tokens_per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace kvroute::tokenize
