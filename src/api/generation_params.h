// GenerationParams: the request fields shared by /v1/completions and /v1/chat/completions
// (sampling, streaming, vLLM's router-relevant extras), parsed and validated once.
//
// Rules follow vLLM's protocol.py: a JSON null counts as "not given"; unknown fields are
// ignored; every rejected field is named in ApiError::param.
//
// Thread safety: plain value type; ParseGenerationParams is a pure function.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "api/api_error.h"

namespace kvroute::api {

// `stream_options` as vLLM reads it.
struct StreamOptions {
  // vLLM: true when the stream_options object is present and the key is absent.
  bool include_usage = true;
  // Usage on every chunk, not only on the final one.
  bool continuous_usage_stats = false;
};

enum class Endpoint { kCompletions, kChatCompletions };

struct GenerationParams {
  std::string model;                       // required, non-empty
  std::optional<std::int64_t> max_tokens;  // >= 0; chat: max_completion_tokens wins
  bool stream = false;
  std::optional<StreamOptions> stream_options;  // present only with stream=true
  bool ignore_eos = false;
  std::optional<std::int64_t> seed;
  std::optional<double> temperature;  // >= 0 (vLLM sets no upper bound)
  std::optional<double> top_p;        // (0, 1]
  int n = 1;                          // only 1 is supported
  std::vector<std::string> stop;      // "stop" as a list; a single string becomes one entry
  std::optional<std::string> user;
  std::optional<std::string> cache_salt;                  // non-empty; enters the hash of block 0
  std::optional<boost::json::object> kv_transfer_params;  // P/D handshake, kept verbatim

  // True when a final usage chunk must be sent (stream_options.include_usage).
  bool IncludeUsage() const { return stream_options && stream_options->include_usage; }
  // True when every chunk carries usage (stream_options.continuous_usage_stats).
  bool ContinuousUsage() const { return stream_options && stream_options->continuous_usage_stats; }
};

// Reads the shared fields of `body` for `endpoint`.
std::expected<GenerationParams, ApiError> ParseGenerationParams(const boost::json::object& body,
                                                                Endpoint endpoint);

}  // namespace kvroute::api
