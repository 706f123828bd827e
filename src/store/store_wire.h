// The store's HTTP/1.1 JSON messages (kvroute's own; loopback or a cluster network):
//
//   POST /v1/kv/match  {"hashes": [u64, ...]}               → 200 {"matched": n}
//       n = how many of the hashes, from the first, the store holds (they are marked used)
//   POST /v1/kv/put    {"block_size": 16, "blocks": [{"hash": u64, "parent": u64 | null,
//                       "tokens": [..block_size ids..], "lora_name": "...", "size_bytes": x}]}
//                                                           → 200 {"stored": k, "refreshed": r}
//   GET  /health → 200 {"status": "ok"};  GET /metrics → Prometheus text (README.md)
//
// Bad bodies get 400 with an OpenAI error object. Encoding and decoding live here so the
// server and the client (and their tests) agree by construction.
//
// Thread safety: pure functions.
#pragma once

#include <expected>
#include <span>
#include <string>
#include <vector>

#include "engine/block_meta.h"
#include "store/store_core.h"

namespace kvroute::store {

std::string EncodeMatch(std::span<const kv::EngineHash> hashes);
std::expected<std::vector<kv::EngineHash>, std::string> DecodeMatch(const std::string& body);

std::string EncodePut(std::span<const engine::BlockMeta> blocks, std::uint32_t block_size,
                      double size_bytes_per_block);
struct PutMessage {
  std::uint32_t block_size = 0;
  std::vector<StoredBlock> blocks;
};
std::expected<PutMessage, std::string> DecodePut(const std::string& body);

}  // namespace kvroute::store
