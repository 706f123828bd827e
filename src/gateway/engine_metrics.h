// EngineMetrics: what kvroute reads from an engine's /metrics (vLLM or SGLang names), with the
// time of the scrape so every consumer knows the age of each value; and EngineMetricsScraper,
// the thin driver that GETs /metrics of every worker on an interval.
//
// Names read (shared/reference/traces-and-k8s.md §7, vllm-protocol.md §3):
//   vLLM    vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc
//           (fallback: vllm:gpu_cache_usage_perc, vLLM < 0.10),
//           vllm:prefix_cache_queries_total / _hits_total (fallback: no _total suffix),
//           vllm:cache_config_info{block_size,num_gpu_blocks,num_cpu_blocks}
//   SGLang  sglang:num_queue_reqs, sglang:num_running_reqs, sglang:token_usage,
//           sglang:cache_config_info{page_size,num_pages}
// Several label sets of a gauge (data-parallel engines) are summed for counts and averaged
// for usage fractions. A value that is absent, not finite or negative is left empty.
//
// Thread safety: ExtractEngineMetrics is pure; EngineMetricsScraper owns one thread (its
// PeriodicPoller).
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/types.h"
#include "fleet/scraped_metrics.h"
#include "gateway/periodic_poller.h"
#include "telemetry/prom_text_parser.h"

namespace kvroute::gateway {

// The parsed form (EngineMetrics, EngineKind) is fleet's: the router state keeps each
// worker's last scrape with its time (fleet/scraped_metrics.h).
using fleet::EngineKind;
using fleet::EngineMetrics;

EngineMetrics ExtractEngineMetrics(const telemetry::PromScrape& scrape, Nanos scraped_at);

using ScrapeTarget = PollTarget;

struct ScraperOptions {
  std::chrono::milliseconds interval{1'000};
  std::chrono::milliseconds timeout{2'000};  // per scrape, whole exchange
  std::string path = "/metrics";
};

// Every interval: scrapes each target in turn (a round never overlaps the next: a slow
// worker delays the round, bounded by `timeout` per target) and hands the result — metrics,
// or an error text — to `sink` on the scraper thread. The loop, Start/Stop/RunOnce/rounds, is
// the PeriodicPoller's; this class adds only how a response becomes EngineMetrics.
class EngineMetricsScraper : public PeriodicPoller {
 public:
  using SinkFn = std::function<void(WorkerId, std::expected<EngineMetrics, std::string>)>;
  EngineMetricsScraper(ScraperOptions options, TargetsFn targets, SinkFn sink, const Clock* clock);
};

}  // namespace kvroute::gateway
