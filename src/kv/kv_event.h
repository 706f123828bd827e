// The in-memory form of vLLM's KV cache events (shared/reference/vllm-protocol.md §1.4).
//
// Produced by the engine model (kvroute sim), encoded/decoded by kv/event_codec, consumed by
// the index. Field meanings follow vLLM exactly; hashes are normalised to 64 bits:
//   - int64 hashes (old builtin-hash vLLM) keep their two's-complement bits;
//   - uint64 hashes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, the default) as is;
//   - bytes hashes (=0) are reduced to their last 8 bytes read big-endian, which is exactly the
//     integer vLLM would have sent in int mode.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/tier.h"
#include "common/types.h"
#include "kv/keys/extra_keys.h"

namespace kvroute::kv {

// An engine's own block hash, as carried by events. Opaque to kvroute: never compared with
// kvroute's BlockKey, only mapped onto one.
using EngineHash = std::uint64_t;

// Storage tier (common/tier.h; named here too, the index's and the engine's vocabulary). vLLM
// sends `medium` as a string ("GPU" from the block pool, "CPU" etc. from offload connectors);
// unknown strings map to kOther and keep their text in the event.
using ::kvroute::kNumTiers;
using ::kvroute::Tier;

// Parses vLLM medium strings case-insensitively: GPU; CPU, CPU_PINNED; DISK, NVME, SSD;
// SHARED, REMOTE. nullopt for anything else. A missing medium means GPU.
std::optional<Tier> TierFromMedium(std::string_view medium);
const char* TierName(Tier tier);        // "GPU", "CPU", "DISK", "SHARED"

struct BlockStored {
  std::vector<EngineHash> block_hashes;           // new blocks, chain order
  std::optional<EngineHash> parent_block_hash;    // block before the first new one; none for block 0
  std::vector<TokenId> token_ids;                 // block_hashes.size() * block_size tokens
  std::uint32_t block_size = 16;
  std::optional<std::int64_t> lora_id;            // deprecated in vLLM, kept for compatibility
  std::optional<std::string> medium;              // "GPU" unless offloaded
  std::optional<std::string> lora_name;
  // One tuple per block (empty: None), exactly what vLLM hashed (kv/keys/extra_keys.h); nullopt
  // when the event has no extra_keys or sends None (vLLM before PR #33304, connectors): the
  // index then knows only the LoRA name (kv::EventExtraKeys).
  std::optional<std::vector<BlockExtraKeys>> extra_keys;
  std::optional<std::int64_t> group_idx;          // KV cache group of hybrid models; 0 or none
  std::optional<std::string> kv_cache_spec_kind;  // e.g. "full_attention"
  std::optional<std::int64_t> kv_cache_spec_sliding_window;
  bool operator==(const BlockStored&) const = default;
};

struct BlockRemoved {
  std::vector<EngineHash> block_hashes;
  std::optional<std::string> medium;
  std::optional<std::int64_t> group_idx;
  bool operator==(const BlockRemoved&) const = default;
};

struct AllBlocksCleared {
  bool operator==(const AllBlocksCleared&) const = default;
};

using KvEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

// One message of the PUB socket: everything one engine step produced.
struct KvEventBatch {
  double ts = 0;  // wall-clock seconds (time.time() in vLLM)
  std::vector<KvEvent> events;
  std::optional<std::int64_t> data_parallel_rank;
  bool operator==(const KvEventBatch&) const = default;
};

}  // namespace kvroute::kv
