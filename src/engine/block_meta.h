// BlockMeta: what the engine knows about one full, cached KV block — its identity in kvroute
// (BlockKey), its identity on the wire (the engine hash put in KV events), its parent's wire
// hash, and optionally its tokens (kept only when a CPU tier needs them for offload events).
//
// Thread safety: plain value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/types.h"
#include "kv/block_key.h"
#include "kv/kv_event.h"

namespace kvroute::engine {

struct BlockMeta {
  kv::BlockKey key = 0;
  kv::EngineHash hash = 0;
  std::optional<kv::EngineHash> parent_hash;  // none for block 0 of a sequence
  std::vector<TokenId> tokens;                // empty unless the CPU tier is on
  std::string lora_name;
};

// A BlockStored event for `metas` (consecutive blocks of one sequence) on `medium`.
kv::BlockStored MakeBlockStored(const std::vector<const BlockMeta*>& metas,
                                std::uint32_t block_size, const char* medium);

}  // namespace kvroute::engine
