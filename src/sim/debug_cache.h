// GET /debug/kv_cache of `kvroute sim`: the engine's cached blocks per tier as JSON, for
// tests that check a KV index against the truth (tests/integration/kv_e2e). A debug endpoint
// of kvroute's sim only; vLLM has nothing like it, so nothing in the router may depend on it.
//
//   {"block_size": 16, "hash_algo": "sha256_cbor", "python_hash_seed": "0",
//    "num_running": 0, "num_waiting": 0,
//    "kv_events": {"published": 123, "dropped_queue_full": 0} | null,
//    "tiers": {"GPU": [<uint64>...], "CPU": [...], "DISK": [...], "SHARED": [...]}}
//
// Hashes are the engine's own, exactly as its KV events carry them (uint64; JSON numbers
// above 2^53 are exact for Boost.JSON and Python, not for JavaScript's Number). hash_algo is
// "sha256_cbor" (vLLM's, low 64 bits, seeded by python_hash_seed) or "block_key" (kvroute's
// canonical kv::BlockKey). kv_events.published is the publisher's count of numbered batches
// (the last seq is published - 1), so a subscriber can tell it has caught up.
//
// Thread safety: pure function.
#pragma once

#include <string>

#include "engine/engine.h"
#include "kv/wire/zmq_publisher.h"
#include "sim/engine_loop.h"

namespace kvroute::sim {

std::string KvCacheDebugJson(const CacheContents& contents, const engine::EngineConfig& config,
                             const kv::ZmqPublisherStats* publisher);

}  // namespace kvroute::sim
