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
// Thread safety: ExtractEngineMetrics is pure; EngineMetricsScraper owns one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/types.h"
#include "sched/types.h"
#include "telemetry/prom_text_parser.h"

namespace kvroute::client {
class BlockingHttpClient;
}

namespace kvroute::gateway {

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
  std::size_t parse_errors = 0;  // malformed lines in the scrape

  double AgeSeconds(Nanos now) const;
  // The scheduler's view (age filled in).
  sched::ScrapedMetrics ToScraped(Nanos now) const;
};

EngineMetrics ExtractEngineMetrics(const telemetry::PromScrape& scrape, Nanos scraped_at);

struct ScrapeTarget {
  WorkerId worker = 0;
  std::string base_url;  // http://host:port
};

struct ScraperOptions {
  std::chrono::milliseconds interval{1'000};
  std::chrono::milliseconds timeout{2'000};  // per scrape, whole exchange
  std::string path = "/metrics";
};

// Every interval: scrapes each target in turn (a round never overlaps the next: a slow
// worker delays the round, bounded by `timeout` per target) and hands the result — metrics,
// or an error text — to `sink` on the scraper thread.
class EngineMetricsScraper {
 public:
  using TargetsFn = std::function<std::vector<ScrapeTarget>()>;
  using SinkFn = std::function<void(WorkerId, std::expected<EngineMetrics, std::string>)>;
  EngineMetricsScraper(ScraperOptions options, TargetsFn targets, SinkFn sink, const Clock* clock);
  ~EngineMetricsScraper();  // Stop()
  EngineMetricsScraper(const EngineMetricsScraper&) = delete;
  EngineMetricsScraper& operator=(const EngineMetricsScraper&) = delete;

  void Start();
  void Stop();     // idempotent
  void RunOnce();  // one round on the calling thread
  std::uint64_t rounds() const { return rounds_.load(); }

 private:
  void Loop();

  const ScraperOptions options_;
  const TargetsFn targets_;
  const SinkFn sink_;
  const Clock* const clock_;
  std::unique_ptr<client::BlockingHttpClient> http_;
  std::atomic<std::uint64_t> rounds_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace kvroute::gateway
