// vLLM's `sha256_cbor` prefix-caching block hash, reproduced so kvroute can check parity
// with an engine's own hashes (vllm/v1/core/kv_cache_utils.py; reference:
// shared/reference/vllm-protocol.md §2.1).
//
//   NONE_HASH = SHA-256(CBOR(text seed))                 (seed = PYTHONHASHSEED string)
//   h_i       = SHA-256(CBOR([bstr h_{i-1}, [uint tokens...], null | [extra keys...]]))
//
// CBOR is canonical: shortest-form heads, definite lengths. KV events carry the low 64 bits
// of a digest (its last 8 bytes read big-endian) when VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1.
//
// This hash is for parity checks and for `kvroute sim` to publish vLLM-shaped hashes; the
// router itself keys blocks with kv::BlockKeyer (faster, no seed agreement needed).
//
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"

namespace kvroute::kv {

struct Sha256Digest {
  std::array<std::uint8_t, 32> bytes{};
  // The integer vLLM puts in KV events: last 8 bytes, big-endian.
  std::uint64_t Low64() const;
  std::string Hex() const;
  bool operator==(const Sha256Digest&) const = default;
};

// One entry of a block's extra-keys tuple. vLLM puts the LoRA name (text) and the cache
// salt (text, block 0 only) there; multimodal keys are out of scope.
using VllmExtraKey = std::string;

Sha256Digest VllmNoneHash(std::string_view python_hash_seed);

Sha256Digest VllmBlockHash(const Sha256Digest& parent, std::span<const TokenId> block_tokens,
                           std::span<const VllmExtraKey> extra_keys = {});

// The canonical CBOR bytes that VllmBlockHash feeds to SHA-256 (exposed for tests).
std::vector<std::uint8_t> VllmBlockHashInput(const Sha256Digest& parent,
                                             std::span<const TokenId> block_tokens,
                                             std::span<const VllmExtraKey> extra_keys);

// Chains VllmBlockHash over every full block of `tokens` starting from `none_hash`.
// `lora_name` (if non-empty) is an extra key of every block; `cache_salt` (if non-empty) an
// extra key of block 0 only, after the LoRA name — vLLM's order.
std::vector<Sha256Digest> VllmBlockHashes(std::span<const TokenId> tokens, std::uint32_t block_size,
                                          const Sha256Digest& none_hash,
                                          std::string_view lora_name = {},
                                          std::string_view cache_salt = {});

}  // namespace kvroute::kv
