// Built-in scorers (contract in plugin.h): each returns one finite, lower-is-better cost per
// candidate. Immutable after construction.
//
//   inflight_requests   router-side in-flight requests (count)
//   inflight_normalized the same, min-max normalised over the candidates to [0, 1]
//   kv_usage            router-side active_kv_blocks / kv_capacity_blocks (1 when unknown)
//   engine_queue        scraped num_waiting, min-max normalised to [0, 1]; a worker with no
//                       scrape (or no num_waiting) costs 1, the worst seen (llm-d queue-scorer)
//   prefix_miss         1 - prefix hit ratio (any tier), in [0, 1]
//   token_load          llm-d's look-ahead token load: min(1, (pending_prefill_tokens +
//                       prompt_tokens * (1 - hit ratio)) / token_limit)
//   dynamo_cost         Dynamo's additive cost in blocks (DynamoCostOptions below)
//   predicted_ttft      predicted TTFT in seconds (latency_model.h), with the decode-load and
//                       KV-wait terms at the weights of TtftTerms
//   decode_slowdown     decode time this placement adds, in seconds, to this request and to the
//                       worker's running requests, against an idle worker (latency_model.h
//                       PredictDecodeSlowdown): summed with predicted_ttft, the predicted
//                       latency of the whole request plus what it costs the others (options
//                       others_share, stall, pending, chunk_tokens: SlowdownTerms)
//
// Thread safety: const methods only; share freely.
#pragma once

#include <memory>

#include "sched/latency_model.h"
#include "sched/plugin.h"

namespace kvroute::sched {

std::shared_ptr<const Scorer> NewInflightRequestsScorer();
std::shared_ptr<const Scorer> NewInflightNormalizedScorer();
std::shared_ptr<const Scorer> NewKvUsageScorer();
std::shared_ptr<const Scorer> NewEngineQueueScorer();
std::shared_ptr<const Scorer> NewPrefixMissScorer();

struct TokenLoadOptions {
  // Token load at which the cost saturates at 1, tokens. llm-d's token-load-scorer default.
  double token_limit = 4194304;
};
std::shared_ptr<const Scorer> NewTokenLoadScorer(const TokenLoadOptions& options);

// cost = prefill_load_scale * max(0, raw_prefill_blocks - overlap_credit)
//        + decode_blocks + active_request_weight * inflight_requests
// raw_prefill_blocks = (pending_prefill_tokens + prompt_tokens) / block_size
// overlap_credit     = gpu * 1.0 + cpu * host_weight + disk * disk_weight
//                      + shared * shared_weight
//   where each tier counts only the prefix blocks beyond the faster tiers (LayerHits), so a
//   block held in two tiers is credited once, at its fastest tier.
// decode_blocks      = active_kv_blocks + ceil(prompt_tokens / block_size) - gpu blocks held
//   (the worker's KV blocks once this request is added, shared prefix deduplicated).
struct DynamoCostOptions {
  double prefill_load_scale = 1.0;
  double host_weight = 0.75;
  double disk_weight = 0.25;
  double shared_weight = 0.0;  // Dynamo: 0, 0.5 with --shared-cache-type hicache
  double active_request_weight = 0.0;
};
std::shared_ptr<const Scorer> NewDynamoCostScorer(const DynamoCostOptions& options);

std::shared_ptr<const Scorer> NewPredictedTtftScorer(const TtftTerms& terms = kFullTtftModel);

std::shared_ptr<const Scorer> NewDecodeSlowdownScorer(const SlowdownTerms& terms = {});

class Registry;
// Adds the built-in scorers with their YAML options to `registry` (Registry::Builtin).
void RegisterBuiltinScorers(Registry& registry);

}  // namespace kvroute::sched
