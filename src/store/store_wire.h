// The store's HTTP/1.1 JSON messages (kvroute's own; loopback or a cluster network):
//
//   POST /v1/kv/match  {"hashes": [u64, ...]}               → 200 {"matched": n}
//       n = how many of the hashes, from the first, the store holds (they are marked used)
//   POST /v1/kv/put    {"block_size": 16, "blocks": [{"hash": u64, "parent": u64 | null,
//                       "tokens": [..block_size ids..], "lora_name": "...", "size_bytes": x}]}
//                                                           → 200 {"stored": k, "refreshed": r}
//   POST /v1/kv/lease  {"hashes": [u64, ...]}               → 200 {"lease": id, "leased": n}
//       leases the run the store holds, from the first (id 0 and n 0: nothing held); those
//       blocks are not evicted until released or the store's lease TTL passes
//   POST /v1/kv/release {"lease": id}                       → 200 {"released": true|false}
//       false: the id is unknown or its lease had ended (expired, or an earlier store life)
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

// The lease request's body is a match body (EncodeMatch / DecodeMatch).
std::string EncodeLeaseReply(const LeaseGrant& grant);
struct LeaseReply {
  std::uint64_t lease = 0;
  std::uint64_t leased = 0;
};
std::expected<LeaseReply, std::string> DecodeLeaseReply(const std::string& body);
std::string EncodeRelease(std::uint64_t lease_id);
std::expected<std::uint64_t, std::string> DecodeRelease(const std::string& body);

}  // namespace kvroute::store
