// BlockMeta: what the engine knows about one full, cached KV block — its identity in kvroute
// (BlockKey), its identity on the wire (the engine hash put in KV events), its parent's wire
// hash, and, only when a CPU tier is on, its tokens and LoRA name (needed to announce the
// block on that tier after the request that computed it is gone).
//
// Kept small on purpose: `kvroute simulate` holds one per GPU block of every simulated
// worker (16k+ blocks × 1,000 workers), so the rarely needed payload sits behind a pointer.
//
// Thread safety: plain value; the payload is immutable and shared between copies.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/types.h"
#include "kv/keys/block_key.h"
#include "kv/kv_event.h"

namespace kvroute::engine {

struct BlockPayload {
  std::vector<TokenId> tokens;  // block_size tokens
  std::string lora_name;
  // The block's extra keys when its request had any (LoRA, salt, images), as its events
  // carried them; nullopt for a plain request.
  std::optional<kv::BlockExtraKeys> extra_keys;
};

struct BlockMeta {
  kv::BlockKey key = 0;
  kv::EngineHash hash = 0;
  std::optional<kv::EngineHash> parent_hash;    // none for block 0 of a sequence
  std::shared_ptr<const BlockPayload> payload;  // null unless the CPU tier is on
};

// A BlockStored with the fields every event of this engine shares (block size, medium,
// group 0, "full_attention", parent, LoRA name); the caller appends hashes and tokens.
kv::BlockStored NewBlockStored(std::uint32_t block_size, const char* medium,
                               std::optional<kv::EngineHash> parent_hash,
                               const std::string& lora_name);

// A BlockStored announcing one block from its meta (tokens, LoRA name and extra keys from the
// payload).
kv::BlockStored BlockStoredOf(const BlockMeta& meta, std::uint32_t block_size, const char* medium);

}  // namespace kvroute::engine
