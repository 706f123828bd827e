#include "bench/metrics_scrape.h"

#include <charconv>
#include <cstdlib>
#include <string>

namespace kvroute::bench {

std::optional<double> SumSamples(std::string_view text, std::string_view metric) {
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
      rest = rest.substr(close + 1);
    } else if (rest.front() != ' ') {
      continue;  // a longer metric name sharing this prefix
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

CacheCounters ReadCacheCounters(std::string_view text) {
  CacheCounters c;
  c.queries = SumSamples(text, "vllm:prefix_cache_queries_total");
  c.hits = SumSamples(text, "vllm:prefix_cache_hits_total");
  c.external_queries = SumSamples(text, "vllm:external_prefix_cache_queries_total");
  c.external_hits = SumSamples(text, "vllm:external_prefix_cache_hits_total");
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
}

}  // namespace kvroute::bench
