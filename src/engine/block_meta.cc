#include "engine/block_meta.h"

namespace kvroute::engine {

kv::BlockStored NewBlockStored(std::uint32_t block_size, const char* medium,
                               std::optional<kv::EngineHash> parent_hash,
                               const std::string& lora_name) {
  kv::BlockStored ev;
  ev.block_size = block_size;
  ev.medium = medium;
  ev.group_idx = 0;
  ev.kv_cache_spec_kind = "full_attention";
  ev.parent_block_hash = parent_hash;
  if (!lora_name.empty()) ev.lora_name = lora_name;
  return ev;
}

kv::BlockStored BlockStoredOf(const BlockMeta& meta, std::uint32_t block_size, const char* medium) {
  static const std::string kNoLora;
  kv::BlockStored ev = NewBlockStored(block_size, medium, meta.parent_hash,
                                      meta.payload ? meta.payload->lora_name : kNoLora);
  ev.block_hashes.push_back(meta.hash);
  if (meta.payload) ev.token_ids = meta.payload->tokens;
  if (meta.payload && meta.payload->extra_keys) {
    ev.extra_keys.emplace(1, *meta.payload->extra_keys);
  }
  return ev;
}

}  // namespace kvroute::engine
