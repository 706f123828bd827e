// The one place that turns a cache view and a worker snapshot into predicted work and time:
// which prompt blocks come from which tier, how many tokens must be recomputed, and the
// predicted TTFT and inter-token latency. Filters and scorers call these helpers instead of
// doing their own cached-token arithmetic, so every policy counts hits the same way.
//
// Bounds: every predicted time is finite and within [0, kMaxPredictedSeconds], whatever the
// snapshot holds (queues of any length, rates from 1e-300 to 1e300, negative fitted
// coefficients): a prediction past the bound means "hopeless here", and comparing two such
// workers by their bound is as good as by their true values. Inputs that are not numbers (a
// non-finite or non-positive rate, a non-finite decode coefficient or correction) are an
// error naming the worker and the input: the caller's learner must never produce them, and a
// silent NaN would make every comparison false and drop or keep workers at random.
//
// Pure functions of their arguments. Thread safety: none needed.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <expected>
#include <string>

#include "sched/types.h"

namespace kvroute::sched {

// The largest time a prediction reports, seconds (~11.6 days).
inline constexpr double kMaxPredictedSeconds = 1e6;

// The usable prompt prefix split by the tier each block would be read from. Tiers are
// layered fastest first: blocks [0, gpu) from GPU, then the CPU depth beyond that, then
// DISK beyond both, then SHARED beyond all three. With depths that count a tier or a faster
// one (CacheView, as the index gives them) this is the fastest tier holding each block along
// the prefix, and SHARED's depth reaches the "any" depth. Blocks only the "any" depth covers
// (a view whose per-tier depths fall short of it, e.g. built from a depth alone) are
// `mixed_blocks`: their tier is unknown.
struct LayeredHits {
  std::array<std::uint32_t, kNumTiers> blocks{};  // per tier, disjoint
  std::uint32_t mixed_blocks = 0;
  std::uint32_t total() const;  // sum of the above
};
// Depths are clamped to the request's num_full_blocks.
LayeredHits LayerHits(const CacheView& view, std::uint32_t num_full_blocks);

// Where each prefix block will actually come from on this worker, for the latency model:
// a lower tier with no known load bandwidth (or no kv_bytes_per_block) cannot be loaded, so
// its blocks are recomputed; mixed blocks are charged at the slowest loadable lower tier
// (an upper bound on their load time), or recomputed if none is loadable.
struct LoadPlan {
  std::array<std::uint32_t, kNumTiers> load_blocks{};  // blocks read from each tier
  std::uint32_t hit_blocks = 0;                            // sum of load_blocks
  std::uint64_t uncached_tokens = 0;                       // prompt tokens to prefill
  double load_s = 0;  // seconds moving lower-tier blocks: the slowest tier's (parallel paths)
};
LoadPlan PlanLoad(const RequestProfile& request, const CacheView& view,
                  const WorkerSnapshot& worker);

// Which load terms PredictTtft adds to queue + prefill + tier load, with their weights
// (0 turns a term off; 1 is the model as written). Both need the worker's decode_step when
// they contribute (an error naming it otherwise).
struct TtftTerms {
  // decode_s: vLLM schedules the running decodes first in every step and fills the rest of
  // the token budget with prefill chunks, so each chunk step of the work ahead of us and of
  // our own prefill also carries the decode batch. Charged as the batch's marginal step time
  // (decode_step(B, K) − decode_step(0, 0): the chunk step already pays the fixed cost) per
  // chunk step, B = inflight_requests, K = active_kv_blocks · block_size.
  double decode_load = 0;
  // kv_wait_s: the request's KV at its final size (prompt + predicted output − the GPU-resident
  // prefix) does not fit beside what the worker holds, so it waits for blocks (or, admitted,
  // preempts a running request later). Each turnover of the running batch (about
  // predicted_output_tokens decode steps: the running requests free their blocks as they
  // finish) frees about the KV capacity, so the wait is deficit / capacity turnovers. It grows
  // with the queue: a worker whose booked KV is 5x its capacity has ~4 turnovers of requests
  // ahead of this one (an earlier model capped the wait at one turnover, so a worker with
  // hundreds of requests queued for memory looked only one batch away; issue 15).
  double kv_wait = 0;
  // tier_queue_s: the engine moves a worker's lower-tier loads over one path per tier, one
  // after another (engine/scheduler_tiers.cc; a NIC or a disk is a shared link), so this
  // request's load cannot end before the loads routed ahead of it on the paths it reads from
  // (pending_tier_load_bytes) have moved. The prefill queue drains while they move, so only
  // the part beyond queue_s waits. Without it a slow store looked as fast on a worker with
  // forty loads queued on its NIC as on an idle one (docs/bench/kv-tiers.md "Session 18").
  double tier_queue = 0;
  // Prefill tokens per engine step (vLLM's max_num_batched_tokens; an engine setting, not a
  // rate): how many chunk steps a prefill takes.
  std::uint32_t chunk_tokens = 8192;
};
// The terms the default policy's scorer uses (both at weight 1).
inline constexpr TtftTerms kFullTtftModel{.decode_load = 1, .kv_wait = 1, .tier_queue = 1};

// Blocks the worker holds for its in-flight requests, for the KV term: the router's booking
// (active_kv_blocks: every request at its final size, a shared prefix counted once per
// request, so an over-estimate) capped by the engine's scraped usage plus the prefill queued
// since (kv_usage · capacity + pending_prefill_tokens / block_size; the scrape is up to an
// interval old). Without a scrape: the booking.
double HeldKvBlocks(const WorkerSnapshot& worker, std::uint32_t block_size);

// Seconds to prefill `uncached_tokens` new tokens on top of `cached_tokens` already in the KV
// cache, at the worker's learned rate and attention share (WorkerSnapshot: a line when the
// share is 0). Bounded; an unusable rate or share is an error naming the worker.
std::expected<double, std::string> PrefillSeconds(const WorkerSnapshot& worker,
                                                  std::uint64_t uncached_tokens,
                                                  std::uint64_t cached_tokens);

// Predicted time to first token on this worker, seconds:
//   queue_s   = pending_prefill_tokens / prefill_tokens_per_s   (work routed ahead of us)
//   prefill_s = PrefillSeconds(uncached, prompt − uncached)     (our own recompute; the
//               prefix loaded or cached still costs attention)
//   load_s    = max over lower tiers of blocks * kv_bytes_per_block / bandwidth (the tiers
//               load over separate paths in parallel)
//   decode_s  = decode_load · ceil((pending + uncached) / chunk) · (decode_step(B, K) − base)
//   kv_wait_s = kv_wait · max(0, held + need − capacity) / capacity · output · decode_step(B, K)
//               (0 with an unknown capacity; need = ceil((prompt + output) / block) − GPU hit)
//   tier_queue_s = tier_queue · max(0, path_s − load_s − pending / rate), path_s = the max,
//               over the lower tiers this request loads from, of (pending_tier_load_bytes +
//               its own bytes) / bandwidth: when its load ends behind the loads ahead on the
//               same path
// The queue-dependent terms queue_s, decode_s and kv_wait_s are multiplied by the worker's
// wait_correction (recorded in the prediction); prefill_s and load_s are this request's own
// work and are not: an idle worker is judged by its rates alone, so a worker that was once
// slow under load is not shunned once its queue is gone. tier_queue_s is a wait (in wait_s)
// but a transfer time at the learned bandwidth, not the engine model's error: not scaled
// (scaled by it, fleet B's default lost 11 % on the default store: docs/bench/kv-tiers.md
// "Session 18").
struct TtftPrediction {
  double queue_s = 0;
  double prefill_s = 0;
  double load_s = 0;
  double decode_s = 0;
  double kv_wait_s = 0;
  double tier_queue_s = 0;
  double wait_correction = 1;  // already applied to queue_s, decode_s and kv_wait_s
  double wait_s() const { return queue_s + decode_s + kv_wait_s + tier_queue_s; }
  double total_s() const { return std::min(kMaxPredictedSeconds, prefill_s + load_s + wait_s()); }
};
// Error text names the missing input (prefill_tokens_per_s, or decode_step when a term needs
// it) when the worker has no rate.
std::expected<TtftPrediction, std::string> PredictTtft(const RequestProfile& request,
                                                       const CacheView& view,
                                                       const WorkerSnapshot& worker,
                                                       const TtftTerms& terms = {});

// Predicted decode inter-token latency on this worker if the request is added, seconds:
// decode_step(batch = inflight_requests + 1,
//             kv_tokens = active_kv_blocks * block_size + tokens this request adds on GPU)
// where the request adds its prompt minus the GPU-resident prefix plus its predicted output
// (its size at the end of decoding, the worst step). Error when decode_step is missing.
std::expected<double, std::string> PredictItl(const RequestProfile& request, const CacheView& view,
                                              const WorkerSnapshot& worker);

// What a placement costs in decode time, seconds, compared with running alone on an idle
// worker of the same speed (H = predicted_output_tokens steps, B = inflight_requests,
// K = active_kv_blocks · block_size, ctx = prompt + H / 2: the request's mean context while it
// decodes; attention reads the whole context whichever tier its prefix came from):
//   own_s    = H · (decode_step(B + 1, K + ctx) − decode_step(1, ctx))
//              the ITL this request pays for sharing the batch;
//   others_s = others_share · H · B · (decode_step(B + 1, K + ctx) − decode_step(B, K))
//              what its decode adds to the B running requests, for the part of their output
//              that overlaps ours (0.5: on average half of a running request's output is left);
//   stall_s  = stall · B · PrefillSeconds(uncached, prompt − uncached)
//              what its prefill adds to them: every chunk step of our recompute is a step of
//              theirs too (vLLM batches decodes with prefill chunks), so each waits about our
//              prefill time. This is what keeps a miss on a busy worker expensive: without it
//              the term sent shared-prompt requests away from their prompt's holder toward a
//              smaller batch (simulate, shared prefix at 8 req/s: hit rate 0.59 -> 0.29).
//   pending_s = pending · N · PrefillSeconds(shared, cached)
//              what its prefill adds to the TTFT of the requests routed there that have no first
//              token yet: vLLM fills each step's token budget (chunk_tokens) in arrival order,
//              so our first chunk shares the step that ends their prefill, and each of them
//              waits for the `shared` = min(uncached, chunk_tokens − P mod chunk_tokens) tokens
//              of ours in it (P = pending_prefill_tokens). N = pending_prefill_requests when
//              P < chunk_tokens (they all end in that step), else 1 (only the last one does).
//              Without it a long prompt was sent to the worker that had just been given a
//              short one, for the few ms of queue it saw, and made that short one wait for the
//              whole long prefill (simulate, azure trace: a 397-token prompt's TTFT 21 ms ->
//              258 ms); round robin never sends two arrivals in a row to one worker.
// Prefix affinity alone keeps a session where its prefix is, and predicted TTFT alone sends a
// new session to the worker holding the common prefix whatever it is decoding; this is the
// cost such a placement has that TTFT does not show.
struct SlowdownTerms {
  double others_share = 0.5;
  double stall = 1;
  double pending = 0;  // 0: the term is off (also in the default preset: docs/bench/policy-matrix.md)
  std::uint32_t chunk_tokens = 8192;
};
struct DecodeSlowdown {
  double own_s = 0;
  double others_s = 0;
  double stall_s = 0;
  double pending_s = 0;
  double total_s() const {
    return std::min(kMaxPredictedSeconds, own_s + others_s + stall_s + pending_s);
  }
};
// Error text names the missing input (decode_step, or prefill_tokens_per_s when the stall term
// is on and the worker decodes something).
std::expected<DecodeSlowdown, std::string> PredictDecodeSlowdown(const RequestProfile& request,
                                                                 const CacheView& view,
                                                                 const WorkerSnapshot& worker,
                                                                 const SlowdownTerms& terms = {});

// What this request's local prefill costs the decodes running on the worker, seconds summed
// over them (the P/D decision's stall term; pd_decision.h):
//   chunk_stall_s = B · Σ_k max(0, chunk_s(k) − decode_step(B, K))
// B = inflight_requests, K = active_kv_blocks · block_size; the uncached tokens run as chunks of
// `chunk_tokens` − B tokens (the decodes take their budget first, vLLM's rule), chunk k on top
// of the cached prefix and the chunks before it, chunk_s(k) = PrefillSeconds of that chunk.
// Why: a step is max(compute, memory) (engine/step_time.h's roofline), not their sum. A chunk
// is compute-bound and the decode batch memory-bound, so the decodes' weight and KV reads hide
// under the chunk's FLOPs: a mixed step lasts about as long as the chunk alone, and each
// running decode waits the chunk's time less the decode step it would have taken anyway.
// Measured in kvroute simulate (Infera's agentic sessions, 1 × TP4 + 4 × TP2, cost rule, every
// decoder step with a chunk; docs/bench/pd-disaggregation.md run E): median chunk alone
// 92.7 ms, decode-only step 26.0 ms, mixed step 93.0 ms at c=64 (100.4 / 31.3 / 101.3 ms at
// c=96); what the running decodes waited, B · Σ (mixed − decode-only), is 0.76 (c=64) and 0.73
// (c=96) of B × the chunks' time alone, and this formula gives 0.97 and 0.96 of it. The old
// form, stall · B · PrefillSeconds(uncached) (PredictDecodeSlowdown), charged a constant share
// of the prefill whatever the batch: at its 0.1 it priced 13 % of the measured stall, at 1 it
// priced 132 %, and it charged a prefill whose chunks are shorter than the decode step,
// which costs the decodes nothing. 0 when nothing runs or nothing is prefilled. Errors as
// PrefillSeconds, and a missing decode_step when B > 0.
std::expected<double, std::string> PredictChunkStall(const RequestProfile& request,
                                                     const CacheView& view,
                                                     const WorkerSnapshot& worker,
                                                     std::uint32_t chunk_tokens);

// Fraction of the prompt's full blocks this worker holds in any tier, in [0, 1]; 0 for a
// prompt shorter than one block.
double PrefixHitRatio(const RequestProfile& request, const CacheView& view);

}  // namespace kvroute::sched
