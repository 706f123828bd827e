#include "gateway/engine_metrics.h"

#include <array>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>

#include "kv/kv_event.h"

namespace kvroute::gateway {
namespace {

bool Usable(double v) { return std::isfinite(v) && v >= 0; }

// Sum over label sets (data-parallel engines report one series each).
std::optional<double> SumOf(const telemetry::PromScrape& s, std::string_view name) {
  std::optional<double> sum;
  for (const telemetry::PromSample* p : s.Find(name)) {
    if (!Usable(p->value)) return std::nullopt;
    sum = sum.value_or(0) + p->value;
  }
  return sum;
}

// Mean over label sets, for fractions.
std::optional<double> MeanOf(const telemetry::PromScrape& s, std::string_view name) {
  auto samples = s.Find(name);
  if (samples.empty()) return std::nullopt;
  double sum = 0;
  for (const telemetry::PromSample* p : samples) {
    if (!Usable(p->value)) return std::nullopt;
    sum += p->value;
  }
  return sum / static_cast<double>(samples.size());
}

std::optional<std::uint32_t> CountOf(std::optional<double> v) {
  if (!v || *v > 4e9) return std::nullopt;
  return static_cast<std::uint32_t>(std::llround(*v));
}

std::optional<std::uint64_t> LabelNumber(const telemetry::PromSample* s, std::string_view label) {
  if (s == nullptr) return std::nullopt;
  const std::string* text = s->Label(label);
  if (text == nullptr || text->empty()) return std::nullopt;
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || p != text->data() + text->size()) return std::nullopt;
  return v;
}

std::optional<double> FirstPresent(const telemetry::PromScrape& s,
                                   std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (auto v = SumOf(s, n)) return v;
  }
  return std::nullopt;
}

// vLLM's offload counters carry transfer_type = "<src>_to_<dst>" (src/dst: the media, e.g.
// CPU_to_GPU; SHARED_STORAGE_to_GPU from the llm-d fs connector): loads are those into GPU,
// summed per source tier. A series with an unusable value spoils its tier.
void TierLoadSums(const telemetry::PromScrape& s, std::string_view name,
                  std::array<std::optional<double>, kNumTiers>* out) {
  std::array<bool, kNumTiers> bad{};
  for (const telemetry::PromSample* p : s.Find(name)) {
    const std::string* type = p->Label("transfer_type");
    if (type == nullptr) continue;
    const std::string_view t(*type);
    const std::size_t at = t.find("_to_");
    if (at == std::string_view::npos || kv::TierFromMedium(t.substr(at + 4)) != Tier::kGpu) continue;
    const std::string_view src = t.substr(0, at);
    std::optional<Tier> tier = kv::TierFromMedium(src);
    if (!tier && (src == "SHARED_STORAGE" || src == "shared_storage")) tier = Tier::kShared;
    if (!tier || *tier == Tier::kGpu) continue;
    const int i = static_cast<int>(*tier);
    if (!Usable(p->value)) bad[i] = true;
    (*out)[i] = (*out)[i].value_or(0) + p->value;
  }
  for (int i = 0; i < kNumTiers; ++i) {
    if (bad[i]) (*out)[i].reset();
  }
}

}  // namespace

EngineMetrics ExtractEngineMetrics(const telemetry::PromScrape& s, Nanos scraped_at) {
  EngineMetrics m;
  m.scraped_at = scraped_at;
  m.parse_errors = s.errors.size() + s.errors_dropped;
  if (!s.Find("vllm:num_requests_waiting").empty() ||
      !s.Find("vllm:num_requests_running").empty()) {
    m.kind = EngineKind::kVllm;
    m.num_waiting = CountOf(SumOf(s, "vllm:num_requests_waiting"));
    m.num_running = CountOf(SumOf(s, "vllm:num_requests_running"));
    m.kv_usage = MeanOf(s, "vllm:kv_cache_usage_perc");
    if (!m.kv_usage) m.kv_usage = MeanOf(s, "vllm:gpu_cache_usage_perc");  // vLLM < 0.10
    m.prefix_cache_queries =
        FirstPresent(s, {"vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"});
    m.prefix_cache_hits =
        FirstPresent(s, {"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"});
    const telemetry::PromSample* info = s.First("vllm:cache_config_info");
    if (auto b = LabelNumber(info, "block_size"); b && *b > 0 && *b < (1u << 20)) {
      m.block_size = static_cast<std::uint32_t>(*b);
    }
    m.num_gpu_blocks = LabelNumber(info, "num_gpu_blocks");
    m.num_cpu_blocks = LabelNumber(info, "num_cpu_blocks");
    // NIXL decode side: what the pulls took (gateway/pd_link_feed.h learns the link from it).
    m.kv_pull_seconds_sum = SumOf(s, "vllm:nixl_xfer_time_seconds_sum");
    m.kv_pull_count = SumOf(s, "vllm:nixl_xfer_time_seconds_count");
    m.kv_pull_bytes_sum = SumOf(s, "vllm:nixl_bytes_transferred_sum");
    // Offloading connector: bytes and seconds of finished loads into GPU memory per medium
    // (fleet::TierLoadLearner learns each tier's bandwidth from them).
    TierLoadSums(s, "vllm:kv_offload_total_bytes_total", &m.tier_load_bytes_sum);
    TierLoadSums(s, "vllm:kv_offload_total_time_total", &m.tier_load_seconds_sum);
  } else if (!s.Find("sglang:num_queue_reqs").empty() ||
             !s.Find("sglang:num_running_reqs").empty()) {
    m.kind = EngineKind::kSglang;
    m.num_waiting = CountOf(SumOf(s, "sglang:num_queue_reqs"));
    m.num_running = CountOf(SumOf(s, "sglang:num_running_reqs"));
    m.kv_usage = MeanOf(s, "sglang:token_usage");
    const telemetry::PromSample* info = s.First("sglang:cache_config_info");
    if (auto b = LabelNumber(info, "page_size"); b && *b > 0 && *b < (1u << 20)) {
      m.block_size = static_cast<std::uint32_t>(*b);
    }
    m.num_gpu_blocks = LabelNumber(info, "num_pages");
  }
  if (m.kv_usage) m.kv_usage = std::min(*m.kv_usage, 1.0);
  return m;
}

EngineMetricsScraper::EngineMetricsScraper(ScraperOptions options, TargetsFn targets, SinkFn sink,
                                           const Clock* clock)
    : PeriodicPoller({.interval = options.interval,
                      .timeout = options.timeout,
                      .path = options.path,
                      .max_body_bytes = 16u << 20},
                     std::move(targets),
                     [sink = std::move(sink), clock](WorkerId worker, PollOutcome outcome) {
                       if (!outcome) {
                         sink(worker, std::unexpected(std::move(outcome.error())));
                       } else if (outcome->status != 200) {
                         sink(worker, std::unexpected("HTTP " + std::to_string(outcome->status)));
                       } else {
                         sink(worker, ExtractEngineMetrics(telemetry::ParsePromText(outcome->body),
                                                           clock->Now()));
                       }
                     }) {}

}  // namespace kvroute::gateway
