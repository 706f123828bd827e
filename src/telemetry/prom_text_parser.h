// Prometheus text exposition parser (format 0.0.4, as served by vLLM, SGLang, kvroute sim and
// every prometheus_client/prometheus-cpp exporter): samples with their labels, metric types
// from `# TYPE` lines, HELP text, label-value escapes (\\ \" \n), +Inf/-Inf/NaN values and
// optional millisecond timestamps.
//
// Robustness: the input is untrusted (any server on the network). A malformed line is
// skipped and reported in PromScrape::errors with its line number; parsing never throws and
// never stops early. Sizes are bounded: at most kMaxErrors errors are kept.
//
// This is the general parser; bench/metrics_scrape.h keeps its own tiny summing helper.
//
// Ownership: PromScrape owns copies of every string. Thread safety: pure function; a
// PromScrape is a plain value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::telemetry {

enum class PromType : std::uint8_t { kUntyped, kCounter, kGauge, kHistogram, kSummary };
const char* PromTypeName(PromType type);

struct PromLabel {
  std::string name;
  std::string value;  // unescaped
  bool operator==(const PromLabel&) const = default;
};

struct PromSample {
  std::string name;               // full sample name, e.g. "vllm:prefix_cache_hits_total"
  std::vector<PromLabel> labels;  // in exposition order
  double value = 0;               // may be +Inf, -Inf or NaN
  std::optional<std::int64_t> timestamp_ms;

  // The value of label `name`, or nullptr.
  const std::string* Label(std::string_view label_name) const;
};

struct PromParseError {
  std::size_t line = 0;  // 1-based
  std::string message;
};

struct PromScrape {
  std::vector<PromSample> samples;  // in exposition order
  // Metric family name -> type / help, from # TYPE and # HELP lines.
  std::map<std::string, PromType, std::less<>> types;
  std::map<std::string, std::string, std::less<>> help;
  std::vector<PromParseError> errors;
  std::size_t errors_dropped = 0;  // errors beyond kMaxErrors, counted only

  // The type of the family a sample belongs to: exact name, else the name without a
  // _total/_created (counter), _bucket/_sum/_count (histogram, summary) suffix. kUntyped when
  // no # TYPE line names it.
  PromType TypeOf(std::string_view sample_name) const;
  // Every sample with exactly this name, in order.
  std::vector<const PromSample*> Find(std::string_view sample_name) const;
  // The first sample with this name, or nullptr.
  const PromSample* First(std::string_view sample_name) const;
  // Sum over every sample with this name (all label sets); nullopt when there is none.
  std::optional<double> Sum(std::string_view sample_name) const;
};

inline constexpr std::size_t kMaxErrors = 100;

PromScrape ParsePromText(std::string_view text);

}  // namespace kvroute::telemetry
