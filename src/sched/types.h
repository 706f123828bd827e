// Inputs of the scheduling core: what one request looks like (RequestProfile, with the
// per-worker cache views the caller looked up) and what each worker looks like right now
// (WorkerSnapshot). The gateway and the discrete-event simulator both fill these; sched/
// only reads them.
//
// Units are in every name or comment: tokens, blocks, seconds, bytes/s. A value the caller
// does not know is a std::optional, never a sentinel. Rates are learned online by the caller
// (seeded from a model x hardware profile); the scheduler never invents one (DESIGN §5).
//
// Thread safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/tier.h"
#include "common/types.h"

namespace kvroute::sched {

// Where one worker holds this request's prompt blocks. Depths count consecutive blocks from
// block 0 (a hole ends the prefix, as in vLLM's prefix caching).
struct CacheView {
  WorkerId worker = 0;
  // Consecutive prefix depth in blocks per tier, indexed by Tier, counting a block that this
  // tier OR A FASTER ONE holds (kv::WorkerMatch): non-decreasing in the tier, so tier t adds
  // depth[t] - depth[t-1] blocks after the faster tiers' prefix (LayerHits). Engines copy a
  // block to the host when the GPU evicts it: a host tier's own run from block 0 is empty
  // while it holds the blocks right after the GPU's prefix.
  std::array<std::uint32_t, kNumTiers> depth_blocks{};
  // Consecutive prefix depth in blocks counting a block as present if ANY tier holds it.
  // >= every entry of depth_blocks (the host clamps it up if the caller's is smaller).
  std::uint32_t any_depth_blocks = 0;
  // The index has not heard from this worker recently: depths may be wrong (informational;
  // recorded in the decision trace).
  bool stale = false;

  std::uint32_t depth(Tier t) const { return depth_blocks[static_cast<int>(t)]; }
};

struct RequestProfile {
  std::string model;                          // served model name the client asked for
  std::optional<std::string> lora_name;       // LoRA adapter, if any
  std::uint64_t prompt_tokens = 0;            // whole prompt, tokens
  std::uint32_t block_size = 16;              // engine KV block size, tokens; > 0
  std::uint32_t num_full_blocks = 0;          // prompt_tokens / block_size
  std::uint64_t predicted_output_tokens = 0;  // expected decode length, tokens
  std::optional<double> itl_slo_s;            // per-request ITL SLO override, seconds
  // One view per worker that holds any of this request's blocks (computed by the caller
  // from kvroute's block index: precise events or predicted entries). A worker without a
  // view holds nothing. At most one view per worker.
  std::vector<CacheView> cache_views;
};

enum class Role : std::uint8_t { kMixed, kPrefill, kDecode };
const char* RoleName(Role role);

// Engine-reported metrics scraped from /metrics; every field may be missing.
struct ScrapedMetrics {
  double age_s = 0;                          // seconds since the scrape
  std::optional<std::uint32_t> num_waiting;  // vllm:num_requests_waiting
  std::optional<std::uint32_t> num_running;  // vllm:num_requests_running
  std::optional<double> kv_usage;            // vllm:kv_cache_usage_perc, 0..1
};

// Learned decode step time: seconds per engine step with `batch` running sequences holding
// `kv_tokens` KV tokens in total. Linear, fitted online by the caller.
struct StepTimeModel {
  double base_s = 0;          // fixed cost per step, seconds
  double per_sequence_s = 0;  // seconds per running sequence
  double per_kv_token_s = 0;  // seconds per active KV token (attention reads)

  double Seconds(double batch, double kv_tokens) const {
    return base_s + per_sequence_s * batch + per_kv_token_s * kv_tokens;
  }
};

// The prompt length at which WorkerSnapshot::prefill_tokens_per_s is quoted: one engine chunk
// (vLLM's default max_num_batched_tokens for long-context serving).
inline constexpr double kPrefillRateReferenceTokens = 8192;

struct WorkerSnapshot {
  WorkerId id = 0;
  std::string name;                 // for traces and logs only
  std::vector<std::string> models;  // served model names (LoRA adapters included)
  bool healthy = true;
  bool draining = false;
  Role role = Role::kMixed;  // which legs of a split request it takes (sched/pd_decision.h)

  // Router-side load: what kvroute itself has routed there and not yet seen finish.
  std::uint32_t inflight_requests = 0;
  std::uint64_t pending_prefill_tokens = 0;  // uncached tokens routed, first token not yet seen
  std::uint32_t pending_prefill_requests = 0;  // those requests (inflight_requests counts them too)
  std::uint64_t active_kv_blocks = 0;        // KV blocks held by in-flight requests
  std::uint64_t kv_capacity_blocks = 0;      // GPU KV cache size, blocks

  std::optional<ScrapedMetrics> scraped;

  // Learned rates (all optional: a plug-in that needs one reports its absence as an error).
  // Uncached prefill throughput, tokens/s, quoted at a prompt of kPrefillRateReferenceTokens.
  std::optional<double> prefill_tokens_per_s;
  // The prefill curve's attention share q (1/tokens; 0: prefill time is a line). Attention
  // makes a token's cost grow with the context it attends to, so prefilling u new tokens on
  // top of c cached ones takes (u + q·(u² + 2·u·c)) / (prefill_tokens_per_s ·
  // (1 + q·kPrefillRateReferenceTokens)) seconds: at q = 0, u / prefill_tokens_per_s. The
  // shape is the model's (gateway::RateLearner keeps its seed's), the scale is learned.
  double prefill_attention_per_token = 0;
  std::optional<StepTimeModel> decode_step;    // decode step time model
  // Bandwidth to bring a block from each tier into GPU memory, bytes/s, indexed by Tier
  // (the GPU entry is unused). Missing: the worker cannot load from that tier.
  std::array<std::optional<double>, kNumTiers> tier_load_bytes_per_s{};
  std::optional<double> kv_bytes_per_block;  // bytes of one KV block, all layers
  // Router-side: bytes of the lower-tier loads routed here whose first token has not arrived,
  // per tier (GPU entry unused): the loads ahead of a new one on each tier's path.
  std::array<double, kNumTiers> pending_tier_load_bytes{};

  // P/D (issue 19; sched/pd_decision.h). Tensor-parallel ranks and GPUs of the engine.
  std::uint32_t tp = 1;
  std::uint32_t gpus = 1;
  // The link a decode leg here pulls its KV over, per NIC lane, bytes/s: learned from
  // observed pulls, seeded from the link spec (fleet::LinkLearner). Absent: no decode legs.
  std::optional<double> kv_link_bytes_per_s;
  double kv_link_latency_s = 0;  // per pull, seconds
  // Bytes one KV block moves when this worker pulls it as a decode engine (all its ranks:
  // engine::KvTransferBytesPerToken × block size).
  std::optional<double> kv_transfer_bytes_per_block;

  // Router-side calibration of the queue-dependent part of predicted TTFT (queue, decode
  // interference, KV wait), learned by the caller from measured against predicted TTFT and
  // raised at once while a request on this worker has waited longer than predicted
  // (fleet::LoadTracker). 1: the model as written. Finite, > 0.
  double wait_correction = 1;

  bool Serves(const std::string& model) const;
};

}  // namespace kvroute::sched
