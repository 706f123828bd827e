// vLLM's `sha256_cbor` prefix-caching block hash, reproduced so kvroute can check parity
// with an engine's own hashes (vllm/v1/core/kv_cache_utils.py; reference:
// shared/reference/vllm-protocol.md §2.1).
//
//   NONE_HASH = SHA-256(CBOR(text seed))                 (seed = PYTHONHASHSEED string)
//   h_i       = SHA-256(CBOR([bstr h_{i-1}, [uint tokens...], null | [extra keys...]]))
//
// The extra keys are the block's tuple from kv/keys/extra_keys.h (the one rule), encoded by
// AppendExtraKeysCbor: text, int, bytes, and [text, int] for a multimodal item.
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
#include "kv/keys/extra_keys.h"

namespace kvroute::kv {

struct Sha256Digest {
  std::array<std::uint8_t, 32> bytes{};
  // The integer vLLM puts in KV events: last 8 bytes, big-endian.
  std::uint64_t Low64() const;
  std::string Hex() const;
  bool operator==(const Sha256Digest&) const = default;
};

Sha256Digest VllmNoneHash(std::string_view python_hash_seed);

Sha256Digest VllmBlockHash(const Sha256Digest& parent, std::span<const TokenId> block_tokens,
                           const BlockExtraKeys& extra_keys = {});

// The canonical CBOR bytes that VllmBlockHash feeds to SHA-256 (exposed for tests).
std::vector<std::uint8_t> VllmBlockHashInput(const Sha256Digest& parent,
                                             std::span<const TokenId> block_tokens,
                                             const BlockExtraKeys& extra_keys);

// Chains VllmBlockHash over every full block of `tokens` starting from `none_hash`, each
// block with the extra keys the rule gives for `inputs` (kv::BlockExtraKeysFor).
std::vector<Sha256Digest> VllmBlockHashes(std::span<const TokenId> tokens, std::uint32_t block_size,
                                          const Sha256Digest& none_hash,
                                          const ExtraKeyInputs& inputs = {});

}  // namespace kvroute::kv
