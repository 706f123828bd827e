// The prefill/decode split decision (issue 19): for one request, serve it aggregated on a
// worker W (prefill and decode there), or split it — prefill on P, pull the KV P computed into
// D (D pulls only the blocks its own cache lacks), decode on D — by predicted latency.
//
// Cost of an option, seconds (lower is better), the default policy's objective extended to two
// workers, from the one cost model (latency_model.h; no second one here):
//   aggregated on W   PredictTtft(W) + PredictDecodeSlowdown(W) (own + others + the stall
//                     its prefill chunks cause every decode running on W: stall · B · the
//                     prefill, and chunk_stall · PredictChunkStall, the chunk time less the
//                     decode step per chunk step and running decode)
//   split P → D       TTFT  = PredictTtft(P) for the prefill leg (one output token)
//                           + transfer: latency + blocks D lacks × D's bytes per block
//                             / (min(TP_P, TP_D) lanes × D's learned per-lane bandwidth)
//                             (engine/kv_transfer.h's model; the pull uses D's NICs)
//                           + tier loads on D + one step of D's batch (vLLM recomputes the
//                             last prompt token there) + D's KV wait
//                     slowdown = PredictDecodeSlowdown(D) without the stall (no prefill
//                             chunks join D's steps) + the stall on P's own decodes (a
//                             mixed P only; a prefill-only P has none) + P's queue behind
// Queue behind (both options, PdOptions::queue_behind): the prefilling worker X (W, or P)
// spends prefill_s = PredictTtft(X).prefill_s on this prompt, and every request that arrives
// at X while it does waits that long more for its first token. In a FIFO queue the number a
// request leaves behind when it starts has the distribution of the number it found ahead
// (arrival/departure symmetry), so the charge is
//     behind_s = queue_behind · pending_prefill_requests(X) · prefill_s
// (X's requests routed and without a first token). Without it the rule was myopic: a split
// looked free whenever the one prefill engine was idle enough for this request, so it sent
// follow-up turns there and the queue they built was paid by the turns behind them
// (simulate, Infera's agentic workload, c=64: TTFT p50 / p99 0.35 / 10.1 s without the term,
// 0.25 / 6.7 s with it; docs/bench/pd-disaggregation.md run C). On a decode worker the same
// term prices the decode legs and local prefills waiting there; its running decodes are the
// stall term's.
// The interference a local prefill would impose on D's running batch is exactly the
// aggregated option's stall term, so the split pays when stall + local prefill exceed the
// prefill elsewhere, its queue and the transfer.
//
// Rules (PdRule). `kCost`: the cheapest option over every eligible W and every eligible
// (P, D). The presets, for comparison, decide only whether to split, as their systems do:
// the decode worker D is picked first (the cheapest aggregated option: the same picks as
// kCost's aggregated side), then
//   `kTokenCap`         Dynamo's conditional disaggregation: split when the prompt tokens D
//                       would compute itself exceed `token_cap` (5,000 by default; "post-cache
//                       ISL", lib/kv-router/src/scheduling/config.rs);
//   `kNonCachedTokens`  llm-d's prefix-based-pd-decider: split when they are ≥
//                       `non_cached_tokens` (0, llm-d's default, = never);
// and a split takes the P that makes the split option cheapest for that D.
//
// Eligibility: healthy, not draining, serves the model. Aggregated on mixed or decode
// workers (a decode worker can prefill locally: llm-d's fallback); P mixed or prefill; D
// mixed or decode with a KV link and transfer bytes (fleet::WorkerSpec::link), P ≠ D.
// ITL SLO (request override, else PdOptions::itl_slo_s): options whose predicted ITL on the
// decoding worker exceeds it are dropped unless every option does (then all are kept, and
// the reason says so).
//
// Pure; ties broken by worker ids (never by row order). Thread safety: none needed.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sched/latency_model.h"
#include "sched/types.h"

namespace kvroute::sched {

enum class PdRule : std::uint8_t { kCost, kTokenCap, kNonCachedTokens };
const char* PdRuleName(PdRule rule);  // "cost", "dynamo_token_cap", "llmd_non_cached"
std::optional<PdRule> ParsePdRule(std::string_view name);

struct PdOptions {
  PdRule rule = PdRule::kCost;
  std::uint64_t token_cap = 5000;      // kTokenCap: split above this many uncached tokens
  std::uint64_t non_cached_tokens = 0;  // kNonCachedTokens: split at ≥ this; 0 = never
  TtftTerms ttft = kFullTtftModel;
  // The default policy's weights (presets.cc `predicted_latency`: stall 0.1, its prefill
  // chunks slow the running decodes' steps far less than a full step each); the split option
  // drops the stall on D. stall 1 charges every running decode the whole local prefill.
  // slowdown.chunk_tokens is the chunk_stall model's chunk size (the decoders' step budget,
  // vLLM's max_num_batched_tokens; simulate sets its fleet's).
  SlowdownTerms slowdown{.others_share = 0.5, .stall = 0.1};
  // Weight of PredictChunkStall (latency_model.h), the stall as the engine's mixed steps cause
  // it (1: the model as written), added to slowdown.stall's term; 0 (default): off. It prices
  // what the decoders' steps measure (0.96-0.97 of it, against 0.13 at stall 0.1), but as the
  // only stall term (`stall 0, chunk_stall 1`) it sends more follow-ups to the one prefill
  // worker, whose queue the decision underprices under bursts: on the Mooncake trace the cost
  // rule's goodput fell 4-13 % (docs/bench/pd-disaggregation.md run E), so it is not the
  // default until P's queue is priced as well.
  double chunk_stall = 0;
  // Weight of the queue-behind term (header): 1 charges each request behind the full
  // prefill seconds, in the TTFT seconds the objective already adds; 0 turns it off.
  double queue_behind = 1;
  std::optional<double> itl_slo_s;  // seconds; the request's own override comes first
};

struct PdOption {
  bool split = false;
  WorkerId decode = 0;   // decodes (and, aggregated, prefills)
  WorkerId prefill = 0;  // prefills; == decode when not split
  double ttft_s = 0;      // predicted time to first token
  double itl_s = 0;       // predicted inter-token latency on `decode`
  double slowdown_s = 0;  // decode slowdown caused and suffered, queue behind included
  double behind_s = 0;    // the queue-behind term alone (header), part of slowdown_s
  // The prompt tokens `prefill` computes (its uncached tokens).
  std::uint64_t prefill_tokens = 0;
  // The prefilling worker's own predicted TTFT (the prefill leg's, when split) and its
  // queue-dependent part (TtftPrediction::wait_s), for the caller's calibration
  // (fleet::RoutedRequest::predicted_ttft_s / predicted_wait_s).
  double prefill_ttft_s = 0;
  double prefill_wait_s = 0;
  // Split only: blocks D pulls, their bytes, the transfer's predicted seconds.
  std::uint32_t transfer_blocks = 0;
  double transfer_bytes = 0;
  double transfer_s = 0;
  double cost_s() const { return std::min(kMaxPredictedSeconds, ttft_s + slowdown_s); }
};

struct PdDecision {
  std::optional<PdOption> chosen;  // none: no eligible option (why_none says why)
  std::string reason;              // one line: the rule, the choice, its rival
  std::string why_none;
  // The cheapest option of each kind (kCost's candidates; the presets' D and its best split).
  std::optional<PdOption> best_aggregated;
  std::optional<PdOption> best_split;
  // Every option priced, cheapest first (ties as the choice breaks them): kCost's aggregated
  // option on each eligible W and the cheapest split for each eligible D; the presets' the
  // aggregated options and best_split. For /debug/route: the alternatives behind `chosen`.
  std::vector<PdOption> options;
  // The presets: the uncached tokens on the D they measured and the threshold they compared
  // them with (kTokenCap: split when above; kNonCachedTokens: when at least, 0 = never).
  std::optional<std::uint64_t> preset_uncached_tokens;
  std::optional<std::uint64_t> preset_threshold_tokens;
};

// One option's cost. `view` arguments are the worker's cache view (a worker without one
// holds nothing). Errors name the worker and the missing or unusable input.
std::expected<PdOption, std::string> CostAggregated(const RequestProfile& request,
                                                    const CacheView& view,
                                                    const WorkerSnapshot& worker,
                                                    const PdOptions& options);
// nullopt: D cannot take a decode leg (no link or transfer bytes).
std::expected<std::optional<PdOption>, std::string> CostSplit(
    const RequestProfile& request, const CacheView& prefill_view, const WorkerSnapshot& prefill,
    const CacheView& decode_view, const WorkerSnapshot& decode, const PdOptions& options);

// The decision over `workers` (a snapshot: ids unique). Errors: unusable inputs (as above).
std::expected<PdDecision, std::string> DecidePd(const RequestProfile& request,
                                                std::span<const WorkerSnapshot> workers,
                                                const PdOptions& options);

// Roles (and the other eligibility conditions) above.
bool CanAggregate(const WorkerSnapshot& w, const std::string& model);
bool CanPrefillLeg(const WorkerSnapshot& w, const std::string& model);
bool CanDecodeLeg(const WorkerSnapshot& w, const std::string& model);

}  // namespace kvroute::sched
