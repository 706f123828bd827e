// Engine: a model server's scheduler and KV cache, simulated. No I/O, no threads, no clock of
// its own: the caller passes `now` and is told how long each step takes. `kvroute sim` drives
// it in (optionally sped-up) real time; `kvroute simulate` in virtual time.
//
// Lifecycle of a request (vLLM V1 semantics):
//   Add() → waiting queue → scheduled (prefix-cache lookup, blocks allocated; prefill possibly
//   chunked over several steps) → running (one token per step) → finished (blocks released;
//   full blocks stay cached until evicted) — or preempted back to waiting (recompute) when KV
//   memory runs out, or aborted.
//
// Step(now) plans one iteration (continuous batching under max_num_seqs and
// max_num_batched_tokens), computes its duration from the roofline step-time model, and
// returns the tokens produced and the KV events emitted. The caller makes the outputs visible
// at now + duration and calls Step again then.
//
// Thread safety: none. One owner thread (or the simulator's event loop) calls every method.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/types.h"
#include "engine/profile.h"
#include "engine/shared_tier.h"
#include "kv/kv_event.h"

namespace kvroute::engine {

enum class EventHash { kVllmSha256Cbor, kBlockKey };

struct EngineConfig {
  std::uint32_t block_size = 16;                // tokens per KV block
  std::uint32_t max_num_seqs = 256;             // requests in one batch
  std::uint32_t max_num_batched_tokens = 8192;  // tokens (prefill + decode) in one step
  bool enable_chunked_prefill = true;
  bool enable_prefix_caching = true;
  std::int64_t num_gpu_blocks_override = 0;  // >0 replaces the profile-derived capacity
  std::int64_t num_cpu_blocks = 0;           // host-memory tier capacity in blocks; 0 = no tier
  double cpu_to_gpu_bandwidth_bytes_per_s = 25e9;  // cost of loading a CPU-tier hit
  // Local disk tier (per worker) and the cluster's shared store, below the CPU tier; both
  // off by default (README.md "KV tiers": policy, load time, events, sources of defaults).
  struct DiskTier {
    std::int64_t num_blocks = 0;        // capacity in blocks; 0 = no disk tier
    double read_bytes_per_s = 6.5e9;    // PCIe 4.0 x4 datacenter NVMe, sequential read
    double write_bytes_per_s = 3.5e9;   // the same drive, sequential write
    double latency_s = 100e-6;          // per load: one NVMe read round trip
    Nanos max_write_backlog = std::chrono::seconds(1);  // offloads queued longer are dropped
  } disk;
  struct SharedTier {
    std::shared_ptr<SharedKvStore> store;  // null = no shared tier
    double read_bytes_per_s = 12.5e9;      // a 100 Gb/s NIC
    double latency_s = 1e-3;               // per load: a store round trip
    // Lease a queued request's store run from its arrival to its scheduling, so the blocks
    // the router credited are not evicted while it waits (store/store_core.h "Leases").
    bool leases = true;
    // A lease still held this long after it was taken is renewed (a new one taken, then the
    // old one released) at the next step: a third of the store's default lease TTL (60 s,
    // `kvroute store --lease-ttl`), so a request queued for minutes behind a full KV cache
    // keeps its credited blocks while an engine that died still loses its leases. 0: never.
    Nanos lease_renew_every{std::chrono::seconds(20)};
  } shared;
  // How a lower-tier hit is loaded. false: the step that schedules the request waits for
  // the load (the whole batch pays it). true: as vLLM's offloading connector does (its
  // get_num_new_matched_tokens answers load_async), the request waits aside, holding the
  // GPU blocks being filled, while the batch keeps running; each tier's path (host DMA,
  // NVMe, the store's NIC) serves its loads one after another; when its last tier is done
  // the request returns to the front of the waiting queue with the prefix on GPU.
  bool async_tier_loads = false;
  std::uint32_t max_model_len = 0;                 // 0 = from the profile
  // Block hashes in KV events: vLLM sha256_cbor with this PYTHONHASHSEED (low 64 bits).
  std::string python_hash_seed = "0";
  std::uint64_t seed = 0;  // output tokens and stop lengths
  // Which hash goes into KV events (and CachedBlockHashes). kVllmSha256Cbor is what a real
  // vLLM with --prefix-caching-hash-algo sha256_cbor sends; kBlockKey puts kvroute's own
  // kv::BlockKey there (no SHA-256 per block: for the discrete-event simulator).
  EventHash event_hash = EventHash::kVllmSha256Cbor;
  // Output token ids are drawn from this palette (the sim fills it with ids of real words of
  // its tokenizer). Empty means DefaultOutputVocabulary(): ids 1000..1999.
  std::vector<TokenId> output_vocabulary;

  // Prefill/decode disaggregation (vLLM NixlConnector semantics, engine/kv_transfer.h).
  // A finished prefill leg's pinned blocks are freed after this much simulated time if no
  // decoder released them (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT, default 480 s).
  Nanos pinned_kv_timeout = std::chrono::seconds(480);
  // The link remote KV arrives over, per lane. Empty name and zero bandwidth: the profile's
  // first link (ResolveConfig); a profile without links cannot take decode legs.
  LinkSpec kv_link;
};

// Ids 1000..1999: the palette used when EngineConfig::output_vocabulary is empty.
std::vector<TokenId> DefaultOutputVocabulary();

enum class FinishReason { kStop, kLength, kAbort };

struct RequestSpec {
  std::string id;  // unique among live requests
  std::vector<TokenId> prompt;
  std::uint32_t max_tokens = 16;  // output tokens at most
  bool ignore_eos = false;        // false: stops at a seeded, deterministic EOS position
  std::uint64_t seed = 0;         // output content; same seed + prompt → same output
  std::string lora_name;          // enters every block's extra keys (kv/keys/extra_keys.h)
  std::string cache_salt;         // enters block 0's extra keys
  // Images: their placeholder tokens are part of `prompt` (prefilled like any token) and
  // their identifiers enter the extra keys of the blocks they overlap.
  std::vector<kv::MmItem> mm_items;

  // P/D prefill leg (kv_transfer_params.do_remote_decode): the request runs max_tokens
  // tokens and finishes with kLength (vLLM hands KV over only for LENGTH_CAPPED requests),
  // then keeps its blocks pinned — not freed, not evictable — until ReleasePinned() or the
  // pinned_kv_timeout. Its last TokenEvent carries the pinned block ids.
  bool remote_decode = false;
  // P/D decode leg (do_remote_prefill): the prompt's KV beyond this engine's own prefix hit
  // is pulled over config().kv_link from a prefill engine of `prefill_tp` ranks; meanwhile
  // the request holds its blocks but takes no step. Then its last prompt token is recomputed
  // (its logits give the first output token), as vLLM does.
  struct RemotePrefill {
    std::uint32_t prefill_tp = 1;
  };
  std::optional<RemotePrefill> remote_prefill;
  // When the request reached the engine, on the caller's clock, for a caller that adds it
  // between steps (`kvroute simulate` adds at arrival, in virtual time): set, the shared
  // store's lease (EngineConfig::shared.leases) is taken at Add, closing the window to the
  // next step; unset (`kvroute sim`, whose loop adds just before it steps), at the end of
  // the next step, and only if that step did not schedule the request (no wasted round trip).
  std::optional<Nanos> arrived_at;
};

// What a request adds to its blocks' extra keys (views into `spec`; kv/keys/extra_keys.h).
inline kv::ExtraKeyInputs ExtraKeyInputsOf(const RequestSpec& spec) {
  return {.lora_name = spec.lora_name, .cache_salt = spec.cache_salt, .mm_items = spec.mm_items};
}

// Where a request's time in the engine went before its first token (simulated times), for
// `kvroute simulate`'s decisions report: the time from arrival to `first_commit` is the wait
// for a place in the batch (token budget, KV memory, the queue ahead); an async tier load
// then waits `tier_path_queue_s` behind the loads ahead of it on its tier's path and moves
// for `tier_transfer_s`; the rest is prefill (and any preemption).
struct TtftParts {
  Nanos first_commit{0};
  double tier_path_queue_s = 0;
  double tier_transfer_s = 0;
};

struct TokenEvent {
  std::string request_id;
  TokenId token = 0;
  bool is_first = false;  // the first output token: TTFT ends here
  std::optional<FinishReason> finished;
  // Set on the first token: prompt tokens served from cache (GPU + CPU tier) or, for a
  // decode leg, not computed here (local hit + pulled), as vLLM counts num_cached_tokens.
  std::uint32_t cached_tokens = 0;
  TtftParts ttft_parts;  // set on the first token
  // The last token of a remote_decode request: the block ids it keeps pinned (what the
  // prefill response names as remote_block_ids). Empty otherwise.
  std::vector<std::int32_t> pinned_block_ids;
};

// Remote KV that arrived for a decode leg (a finished transfer).
struct KvTransferDone {
  std::string request_id;
  std::uint32_t blocks = 0;  // blocks pulled (those the local prefix cache lacked)
  double bytes = 0;          // modelled bytes moved
  Nanos started{0};          // simulated times
  Nanos finished{0};
};

// A prefill leg's pinned KV, as a decoder's claim is checked against it.
struct PinnedKv {
  std::vector<std::int32_t> block_ids;
  std::uint32_t num_prompt_tokens = 0;
  Nanos deadline{0};  // simulated time the blocks are freed if not released
};

struct StepResult {
  void Clear();  // empties every field, keeping the vectors' capacity

  Nanos duration{0};                                // 0 when there was nothing to do
  std::vector<TokenEvent> tokens;                   // in the order they were produced
  std::vector<std::string> finished_without_token;  // aborted / rejected request ids
  std::vector<kv::KvEvent> kv_events;               // one KvEventBatch's worth, in emission order
  std::uint32_t num_prefill_tokens = 0;
  std::uint32_t num_decode_tokens = 0;
  std::vector<KvTransferDone> kv_transfers_done;  // remote KV arrived by this step's start
  std::vector<std::string> pins_expired;          // pinned prefills freed at the timeout
};

struct EngineStats {
  std::uint32_t num_running = 0;
  std::uint32_t num_waiting = 0;
  double kv_cache_usage = 0;               // 0..1, blocks in use by live requests / capacity
  std::uint64_t prefix_cache_queries = 0;  // tokens (vLLM counts tokens)
  std::uint64_t prefix_cache_hits = 0;     // tokens
  std::uint64_t cpu_cache_hits = 0;        // tokens served from the CPU tier
  // Per tier (indexed by Tier; README "KV tiers"): prompt tokens served from it, blocks it
  // holds now, blocks it evicted, bytes loaded from it to GPU (GPU: 0). The shared entry of
  // blocks/evictions stays 0: the store keeps those.
  std::array<std::uint64_t, kNumTiers> tier_hit_tokens{};
  std::array<std::int64_t, kNumTiers> tier_blocks{};
  std::array<std::uint64_t, kNumTiers> tier_evictions{};
  std::array<double, kNumTiers> tier_load_bytes{};
  std::int64_t num_disk_blocks = 0;           // disk tier capacity
  std::uint64_t disk_dropped_writes = 0;      // offloads the disk's write backlog refused
  std::uint64_t num_preemptions = 0;
  std::uint64_t prompt_tokens = 0;
  std::uint64_t generation_tokens = 0;
  std::int64_t num_gpu_blocks = 0;
  std::int64_t num_cpu_blocks = 0;
  // P/D. Prefill side: blocks and requests pinned for decoders now; requests freed by a
  // decoder's release and at the timeout (counters). Decode side: legs whose KV is in
  // flight now; transfers finished, blocks and bytes pulled (counters).
  std::int64_t num_pinned_blocks = 0;
  std::uint32_t num_pinned_requests = 0;
  std::uint64_t pins_released = 0;
  std::uint64_t pins_expired = 0;
  std::uint32_t num_loading = 0;
  std::uint64_t kv_transfers = 0;
  std::uint64_t kv_transfer_blocks = 0;
  double kv_transfer_bytes = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Queues a request. Fails (returns an error message) if the prompt + max_tokens cannot fit
  // max_model_len or the id is in use.
  virtual std::optional<std::string> Add(RequestSpec spec) = 0;
  // Stops a request; its blocks are released (cached blocks stay cached).
  virtual void Abort(const std::string& request_id) = 0;
  virtual bool HasWork() const = 0;
  virtual StepResult Step(Nanos now) = 0;
  // Step, filling a caller-owned result: `out` is cleared first and its vectors keep their
  // capacity, so a caller that steps millions of times (kvroute simulate) allocates its
  // result once. Same outcome as Step(now).
  virtual void StepInto(Nanos now, StepResult* out) = 0;
  virtual EngineStats Stats() const = 0;
  virtual const EngineConfig& config() const = 0;
  virtual const Profile& profile() const = 0;
  // Drops every cached block (vLLM reset_prefix_cache); emits AllBlocksCleared on the next step.
  virtual bool ResetPrefixCache() = 0;
  // Engine hashes of the blocks cached per tier right now (tests, the e2e index check).
  virtual std::vector<kv::EngineHash> CachedBlockHashes(kv::Tier tier) const = 0;

  // P/D prefill side: the pinned KV of a finished remote_decode request; nullopt when
  // unknown, released or expired.
  virtual std::optional<PinnedKv> FindPinned(const std::string& request_id) const = 0;
  // Frees a pinned request's blocks (its decoder has read them). False when not pinned.
  virtual bool ReleasePinned(const std::string& request_id) = 0;
  // The simulated time of the next thing that happens without new input — remote KV
  // arriving, a pin expiring — so an idle caller knows when to Step again; nullopt if none.
  virtual std::optional<Nanos> NextTimedEvent() const = 0;
};

// Fills the defaults a config leaves open: max_model_len from the profile, the output palette,
// and num_gpu_blocks_override from the profile's memory arithmetic when it is 0 (so
// config().num_gpu_blocks_override of an engine is always its real capacity).
EngineConfig ResolveConfig(const Profile& profile, EngineConfig config);

// config() of the returned engine is ResolveConfig(profile, config).
std::unique_ptr<Engine> NewEngine(const Profile& profile, const EngineConfig& config);

}  // namespace kvroute::engine
