#include "engine/block_meta.h"

namespace kvroute::engine {

kv::BlockStored MakeBlockStored(const std::vector<const BlockMeta*>& metas,
                                std::uint32_t block_size, const char* medium) {
  kv::BlockStored ev;
  ev.block_size = block_size;
  ev.medium = medium;
  ev.group_idx = 0;
  ev.kv_cache_spec_kind = "full_attention";
  if (metas.empty()) return ev;
  ev.parent_block_hash = metas.front()->parent_hash;
  if (!metas.front()->lora_name.empty()) ev.lora_name = metas.front()->lora_name;
  for (const BlockMeta* m : metas) {
    ev.block_hashes.push_back(m->hash);
    ev.token_ids.insert(ev.token_ids.end(), m->tokens.begin(), m->tokens.end());
  }
  return ev;
}

}  // namespace kvroute::engine
