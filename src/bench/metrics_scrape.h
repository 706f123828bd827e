// Reading engine counters from a Prometheus text exposition (/metrics of vLLM, SGLang or
// kvroute sim), so kvroute bench reports the prefix-cache hit rate the engines themselves saw.
//
// vLLM's counters (tokens): vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total,
// one sample per label set (model_name, engine); the bench sums every label set. A tiered
// engine that exports CPU-tier counters (vllm:external_prefix_cache_* in vLLM ≥ 0.10 with a
// KV connector) is read the same way when present, and so are kvroute sim's hits per tier
// (kvroute:kv_tier_hit_tokens_total{tier="GPU|CPU|DISK|SHARED"}, exported only with a lower
// tier: vLLM has no per-tier counter).
//
// Thread safety: pure functions.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "common/tier.h"

namespace kvroute::bench {

// Sum of every sample of `metric` (exact name, any labels); nullopt when no sample exists.
// Lines starting with '#' and malformed lines are skipped.
std::optional<double> SumSamples(std::string_view exposition, std::string_view metric);
// The same over the samples whose labels include label="value".
std::optional<double> SumSamples(std::string_view exposition, std::string_view metric,
                                 std::string_view label, std::string_view value);

struct CacheCounters {
  std::optional<double> queries, hits;                    // GPU prefix cache
  std::optional<double> external_queries, external_hits;  // a lower tier, when exported
  std::array<std::optional<double>, kNumTiers> tier_hits;  // prompt tokens hit, per Tier
};

CacheCounters ReadCacheCounters(std::string_view exposition);

// Adds `b` into `a` (sum over workers); a missing side stays missing only if both are.
void Accumulate(CacheCounters& a, const CacheCounters& b);

}  // namespace kvroute::bench
