// Helpers for the index tests: build vLLM-shaped events over synthetic block contents.
// A block's content is a small integer c; its 16 tokens are c*16 .. c*16+15, so equal
// content ids mean equal tokens.
//
// Thread safety: plain functions.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kv/index/index.h"
#include "kv/keys/block_key.h"
#include "kv/kv_event.h"

namespace kvroute::kv::testing {

inline std::vector<TokenId> TokensOf(const std::vector<std::uint32_t>& contents,
                                     std::uint32_t block_size = kDefaultBlockSize) {
  std::vector<TokenId> out;
  for (std::uint32_t c : contents) {
    for (std::uint32_t k = 0; k < block_size; ++k) out.push_back(c * block_size + k);
  }
  return out;
}

inline BlockStored Store(std::vector<EngineHash> hashes, std::optional<EngineHash> parent,
                         const std::vector<std::uint32_t>& contents, std::string medium = "GPU",
                         std::optional<std::string> lora = std::nullopt) {
  BlockStored s;
  s.block_hashes = std::move(hashes);
  s.parent_block_hash = parent;
  s.token_ids = TokensOf(contents);
  s.block_size = kDefaultBlockSize;
  s.medium = std::move(medium);
  s.lora_name = std::move(lora);
  return s;
}

inline BlockRemoved Remove(std::vector<EngineHash> hashes, std::string medium = "GPU") {
  BlockRemoved r;
  r.block_hashes = std::move(hashes);
  r.medium = std::move(medium);
  return r;
}

inline KvEventBatch Batch(std::vector<KvEvent> events) {
  KvEventBatch b;
  b.events = std::move(events);
  return b;
}

// Canonical keys of a prompt made of these block contents.
inline std::vector<BlockKey> PromptKeys(const BlockKeyer& keyer,
                                        const std::vector<std::uint32_t>& contents,
                                        const std::string& lora = "") {
  return keyer.Keys(TokensOf(contents, keyer.block_size()), ExtraKeyInputs{.lora_name = lora});
}

inline std::map<WorkerId, WorkerMatch> ByWorker(const std::vector<WorkerMatch>& matches) {
  std::map<WorkerId, WorkerMatch> out;
  for (const WorkerMatch& m : matches) out[m.worker] = m;
  return out;
}

inline WorkerMatch Match(WorkerId worker, std::uint32_t gpu, std::uint32_t cpu, std::uint32_t disk,
                         std::uint32_t shared, std::uint32_t any, bool stale = false) {
  WorkerMatch m;
  m.worker = worker;
  m.depth = {gpu, cpu, disk, shared};
  m.any_depth = any;
  m.stale = stale;
  return m;
}

// A worker whose prefix of `depth` blocks is on GPU: every tier's depth counts it (a tier's
// depth counts blocks in that tier or a faster one, WorkerMatch).
inline WorkerMatch GpuPrefix(WorkerId worker, std::uint32_t depth, bool stale = false) {
  return Match(worker, depth, depth, depth, depth, depth, stale);
}

}  // namespace kvroute::kv::testing
