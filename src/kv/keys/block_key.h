// Block keys: the one canonical identity of a KV block inside kvroute.
//
// A prompt is cut into full blocks of `block_size` tokens (the tail that does not fill a
// block is never keyed, as in vLLM). Each block's key chains its parent's key with its own
// tokens and its extra keys (kv/keys/extra_keys.h: LoRA name, multimodal items, cache salt —
// vLLM's rule), so equal keys mean equal prefixes under equal extra keys:
//
//   root  = XXH3_64(seed_le64 ‖ "lora:" ‖ 0x00 ‖ "salt:", seed)   (bytes kept from when the
//           adapter and salt entered the root, so keys of plain prompts did not change)
//   key_i = XXH3_64(key_{i-1}_le64 ‖ tokens_i as u32 LE [‖ CBOR(extra_keys_i)], seed)
//
// The CBOR part is present only when block i has extra keys, and is the very bytes vLLM's
// sha256_cbor hashes as its third element (AppendExtraKeysCbor), so a block's key depends on
// exactly what its vLLM hash depends on. Without extra keys the bytes are parent ‖ tokens
// (the length tells the two forms apart). The index, the router and the simulator use these
// keys; engine hashes from KV events are mapped onto them (see kv/README.md).
//
// Thread safety: BlockKeyer is immutable after construction; share it freely.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/types.h"
#include "kv/keys/extra_keys.h"

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

  // The parent of block 0 (every request's: adapters and salts enter through the blocks'
  // extra keys).
  BlockKey Root() const { return root_; }

  // Key of one full block. REQUIRES: block_tokens.size() == block_size().
  BlockKey Next(BlockKey parent, std::span<const TokenId> block_tokens,
                const BlockExtraKeys& extra = {}) const;

  // Appends the keys of every full block of `tokens`, chained from `root`, to *out.
  // `extra[i]` are block i's extra keys; blocks past extra.size() have none.
  void AppendKeys(std::span<const TokenId> tokens, BlockKey root, std::vector<BlockKey>* out,
                  std::span<const BlockExtraKeys> extra = {}) const;

  // Keys of every full block of a request's tokens, chained from Root(), with the extra keys
  // the rule gives for `inputs` (kv::BlockExtraKeysFor).
  std::vector<BlockKey> Keys(std::span<const TokenId> tokens,
                             const ExtraKeyInputs& inputs = {}) const;

 private:
  std::uint32_t block_size_;
  std::uint64_t seed_;
  BlockKey root_;
};

}  // namespace kvroute::kv
