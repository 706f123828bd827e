#include "bench/metrics_scrape.h"

#include <array>
#include <charconv>
#include <cstdlib>
#include <string>

namespace kvroute::bench {

namespace {

// Sums `metric`'s samples; with a non-empty `label_pair` (label="value"), only those whose
// label set contains it.
std::optional<double> SumMatching(std::string_view text, std::string_view metric,
                                  std::string_view label_pair) {
  std::optional<double> sum;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty() || line.front() == '#') continue;
    if (!line.starts_with(metric)) continue;
    std::string_view rest = line.substr(metric.size());
    if (rest.empty()) continue;
    if (rest.front() == '{') {
      std::size_t close = rest.find('}');  // label values in these counters hold no '}'
      if (close == std::string_view::npos) continue;
      if (!label_pair.empty()) {
        const std::string_view labels = rest.substr(1, close - 1);
        const std::size_t at = labels.find(label_pair);
        // A whole label: at the start or after a comma (not the tail of a longer name).
        if (at == std::string_view::npos || (at > 0 && labels[at - 1] != ',')) continue;
      }
      rest = rest.substr(close + 1);
    } else if (rest.front() != ' ') {
      continue;  // a longer metric name sharing this prefix
    } else if (!label_pair.empty()) {
      continue;  // no labels, so not the one asked for
    }
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    std::string_view value = rest.substr(0, rest.find(' '));  // an optional timestamp follows
    std::string buf(value);  // strtod: from_chars<double> handles "+Inf"/"NaN" differently
    char* end = nullptr;
    double v = std::strtod(buf.c_str(), &end);
    if (end == buf.c_str() || *end != '\0') continue;
    sum = sum.value_or(0) + v;
  }
  return sum;
}

}  // namespace

std::optional<double> SumSamples(std::string_view text, std::string_view metric) {
  return SumMatching(text, metric, {});
}

std::optional<double> SumSamples(std::string_view text, std::string_view metric,
                                 std::string_view label, std::string_view value) {
  const std::string pair = std::string(label) + "=\"" + std::string(value) + "\"";
  return SumMatching(text, metric, pair);
}

CacheCounters ReadCacheCounters(std::string_view text) {
  CacheCounters c;
  c.queries = SumSamples(text, "vllm:prefix_cache_queries_total");
  c.hits = SumSamples(text, "vllm:prefix_cache_hits_total");
  c.external_queries = SumSamples(text, "vllm:external_prefix_cache_queries_total");
  c.external_hits = SumSamples(text, "vllm:external_prefix_cache_hits_total");
  static constexpr std::array<std::string_view, kNumTiers> kTierLabels = {"GPU", "CPU", "DISK",
                                                                          "SHARED"};
  for (int t = 0; t < kNumTiers; ++t) {
    c.tier_hits[t] = SumSamples(text, "kvroute:kv_tier_hit_tokens_total", "tier", kTierLabels[t]);
  }
  return c;
}

void Accumulate(CacheCounters& a, const CacheCounters& b) {
  auto add = [](std::optional<double>& x, const std::optional<double>& y) {
    if (y) x = x.value_or(0) + *y;
  };
  add(a.queries, b.queries);
  add(a.hits, b.hits);
  add(a.external_queries, b.external_queries);
  add(a.external_hits, b.external_hits);
  for (int t = 0; t < kNumTiers; ++t) add(a.tier_hits[t], b.tier_hits[t]);
}

}  // namespace kvroute::bench
