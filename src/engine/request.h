// Request: one sequence inside the engine model — its tokens (prompt, then outputs), how many
// of them have KV computed, the blocks it holds, and the keys/hashes of its full blocks.
// BlockHasher extends those keys as tokens arrive; OutputPlan decides the output tokens.
//
// Ownership: the Scheduler owns every Request. Thread safety: none.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/block_pool.h"
#include "engine/engine.h"
#include "kv/keys/block_key.h"
#include "kv/keys/vllm_hash.h"

namespace kvroute::engine {

// Deterministic output: a function of (engine seed, request seed, prompt) only, so the same
// request gives the same tokens on every run and every replica.
class OutputPlan {
 public:
  OutputPlan(std::uint64_t engine_seed, const RequestSpec& spec);
  // Output tokens before the request stops: max_tokens with ignore_eos, otherwise a seeded
  // length in [1, max_tokens].
  std::uint32_t length() const { return length_; }
  FinishReason reason() const { return reason_; }
  // The k-th output token (k from 0), drawn from `palette` (non-empty).
  TokenId Token(std::uint32_t k, std::span<const TokenId> palette) const;

 private:
  std::uint64_t seed_;
  std::uint32_t length_;
  FinishReason reason_;
};

struct Request {
  RequestSpec spec;  // spec.prompt is released after construction: `tokens` holds it
  std::uint64_t arrival = 0;    // admission order: FCFS and "newest" for preemption
  std::vector<TokenId> tokens;  // prompt then outputs
  std::uint32_t num_prompt_tokens = 0;
  std::uint64_t num_computed = 0;  // tokens whose KV exists in `blocks`
  std::vector<BlockId> blocks;
  std::uint32_t num_cached_blocks = 0;  // blocks[0, n) already offered to the prefix cache
  std::vector<kv::BlockKey> keys;       // one per full block of `tokens`
  std::vector<kv::EngineHash> hashes;   // event hash per full block
  kv::Sha256Digest last_digest;         // sha256_cbor chain state (vLLM mode)
  OutputPlan plan;
  std::uint32_t num_output = 0;
  std::optional<std::uint32_t> cached_tokens;  // prefix hit at first scheduling
  bool running = false;
  // P/D decode leg: remote KV not yet requested (spec.remote_prefill set, nothing pulled),
  // in flight (`loading`, under `transfer_id`), or arrived (in the scheduler's loaded_ queue).
  bool remote_pending = false;
  bool loading = false;
  bool loaded = false;
  std::uint64_t transfer_id = 0;
  std::uint32_t pulled_blocks = 0;
  // Async lower-tier load (EngineConfig::async_tier_loads): in flight until `tier_ready`
  // (`tier_loading`), then back in the waiting queue with its prefix on GPU
  // (`tier_loaded`: its hit was counted already).
  bool tier_loading = false;
  bool tier_loaded = false;
  Nanos tier_ready{0};
  // Where its time to first token went (TokenEvent::ttft_parts): when it was first given
  // blocks (a prefill, an async load or a pull began), and its async load's wait for the
  // tier paths (behind loads queued ahead of it) and its own transfer time.
  std::optional<Nanos> first_commit;
  double tier_path_queue_s = 0;
  double tier_transfer_s = 0;
  // The shared store's lease on this request's prefix run (SharedKvStore::Lease), held from
  // the first step after it arrived until it is scheduled or dropped; 0 = none.
  std::uint64_t store_lease = 0;
  Nanos store_lease_at{0};  // when it was taken (EngineConfig::SharedTier::lease_renew_every)

  Request(RequestSpec s, std::uint64_t arrival_index, std::uint64_t engine_seed);
  std::uint64_t num_tokens() const { return tokens.size(); }
  // What the request adds to its blocks' extra keys (views into spec).
  kv::ExtraKeyInputs extra_key_inputs() const { return ExtraKeyInputsOf(spec); }
  // Block i's extra keys (kv::BlockExtraKeysFor over its tokens).
  kv::BlockExtraKeys BlockExtraKeys(std::size_t i, std::uint32_t block_size) const;
};

// Computes block keys and event hashes of full blocks incrementally.
class BlockHasher {
 public:
  BlockHasher(std::uint32_t block_size, EventHash mode, std::string_view python_hash_seed);
  // Keys/hashes every full block of req->tokens not yet keyed.
  void Extend(Request* req) const;
  const kv::BlockKeyer& keyer() const { return keyer_; }

 private:
  kv::BlockKeyer keyer_;
  EventHash mode_;
  kv::Sha256Digest none_hash_;
};

}  // namespace kvroute::engine
