// Block keys: the one canonical identity of a KV block inside kvroute.
//
// A prompt is cut into full blocks of `block_size` tokens (the tail that does not fill a
// block is never keyed, as in vLLM). Each block's key chains its parent's key with its own
// tokens, so equal keys mean equal prefixes:
//
//   root      = XXH3_64(seed_le64 ‖ "lora:" ‖ lora_name ‖ 0x00 ‖ "salt:" ‖ cache_salt)
//   key_i     = XXH3_64(key_{i-1}_le64 ‖ tokens_i as u32 LE, seed)
//
// The LoRA name and the cache salt enter through the root: in vLLM the LoRA name is an
// extra key of every block and the salt of block 0 only; since keys chain, putting both in
// the root gives the same equality relation. The index, the router and the simulator use
// these keys; engine hashes from KV events are mapped onto them (see kv/README.md).
//
// Thread safety: BlockKeyer is immutable after construction; share it freely.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/types.h"

namespace kvroute::kv {

using BlockKey = std::uint64_t;

inline constexpr std::uint32_t kDefaultBlockSize = 16;
inline constexpr std::uint64_t kDefaultKeySeed = 0x6b76726f75746531ULL;  // "kvroute1"

class BlockKeyer {
 public:
  explicit BlockKeyer(std::uint32_t block_size = kDefaultBlockSize,
                      std::uint64_t seed = kDefaultKeySeed);

  std::uint32_t block_size() const { return block_size_; }
  std::uint64_t seed() const { return seed_; }

  // The parent of block 0 for a request with this LoRA adapter and cache salt (either may
  // be empty).
  BlockKey Root(std::string_view lora_name = {}, std::string_view cache_salt = {}) const;

  // Key of one full block. REQUIRES: block_tokens.size() == block_size().
  BlockKey Next(BlockKey parent, std::span<const TokenId> block_tokens) const;

  // Appends the keys of every full block of `tokens`, chained from `root`, to *out.
  void AppendKeys(std::span<const TokenId> tokens, BlockKey root, std::vector<BlockKey>* out) const;

  // Convenience: keys of every full block, chained from Root(lora_name, cache_salt).
  std::vector<BlockKey> Keys(std::span<const TokenId> tokens, std::string_view lora_name = {},
                             std::string_view cache_salt = {}) const;

 private:
  std::uint32_t block_size_;
  std::uint64_t seed_;
};

}  // namespace kvroute::kv
