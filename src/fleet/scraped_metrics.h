// EngineMetrics: what kvroute last read from a worker's /metrics, with the time of the scrape,
// so every consumer knows the age of each value. Parsing (vLLM and SGLang names) and the
// scraper that fetches it are the gateway's (gateway/engine_metrics.h); kvroute simulate
// fills it from its engines' counters. fleet::RouterState keeps one per worker and puts it
// in the snapshot only while it is younger than RouterStateOptions::metrics_max_age.
//
// Thread safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "common/tier.h"
#include "common/types.h"
#include "sched/types.h"

namespace kvroute::fleet {

enum class EngineKind : std::uint8_t { kUnknown, kVllm, kSglang };

struct EngineMetrics {
  Nanos scraped_at{0};  // monotonic time the response arrived
  EngineKind kind = EngineKind::kUnknown;
  std::optional<std::uint32_t> num_waiting;
  std::optional<std::uint32_t> num_running;
  std::optional<double> kv_usage;              // fraction 0..1
  std::optional<double> prefix_cache_queries;  // counter, tokens
  std::optional<double> prefix_cache_hits;     // counter, tokens
  std::optional<std::uint32_t> block_size;     // tokens per KV block (SGLang: page_size)
  std::optional<std::uint64_t> num_gpu_blocks;
  std::optional<std::uint64_t> num_cpu_blocks;
  // P/D decode side (vLLM's NIXL histograms): the finished pulls' summed seconds, their
  // count and summed bytes; gateway/pd_link_feed.h learns the worker's link from them.
  std::optional<double> kv_pull_seconds_sum;
  std::optional<double> kv_pull_count;
  std::optional<double> kv_pull_bytes_sum;
  // Lower-tier loads into GPU memory so far, per Tier (GPU: unused): vLLM's offloading
  // connector counters vllm:kv_offload_total_bytes_total and vllm:kv_offload_total_time_total
  // {transfer_type="<medium>_to_GPU"}. RouterState::SetMetrics learns each tier's bandwidth
  // from their growth between two scrapes (TierLoadLearner, the preferred source).
  std::array<std::optional<double>, kNumTiers> tier_load_bytes_sum{};
  std::array<std::optional<double>, kNumTiers> tier_load_seconds_sum{};
  std::size_t parse_errors = 0;  // malformed lines in the scrape

  double AgeSeconds(Nanos now) const;
  // The scheduler's view (age filled in).
  sched::ScrapedMetrics ToScraped(Nanos now) const;
};

}  // namespace kvroute::fleet
