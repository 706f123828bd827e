// CompletionRequest: a validated POST /v1/completions body.
//
// `prompt` accepts every form OpenAI allows — string | [string] | [int] | [[int]] — but only
// one prompt per request: a batch of several prompts is a clear 400 (param "prompt"), because
// one request maps to one routing decision and one engine sequence.
//
// The parsed JSON object is kept in `body` so a proxy can forward the request unchanged (or
// with only kv_transfer_params / max_tokens rewritten) without re-serializing typed fields.
//
// Thread safety: plain value type; ParseCompletionRequest is a pure function.
#pragma once

#include <boost/json/object.hpp>
#include <expected>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/api_error.h"
#include "api/generation_params.h"
#include "common/types.h"

namespace kvroute::api {

// A prompt given as text (tokenized by the server, with BOS) or as token ids (used as is).
using Prompt = std::variant<std::string, std::vector<TokenId>>;

// vLLM's default max_tokens for /v1/completions when the request has none.
inline constexpr std::int64_t kDefaultCompletionMaxTokens = 16;

struct CompletionRequest {
  GenerationParams params;
  Prompt prompt;
  bool echo = false;
  boost::json::object body;  // the original request, as parsed
};

// Parses and validates `body` (the raw HTTP body).
std::expected<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body);
// Same, from an already parsed object (moved into the result's `body`).
std::expected<CompletionRequest, ApiError> ParseCompletionRequest(boost::json::object body);

// Reads a `prompt` value (one prompt in any of the four forms); `param` names it in errors.
std::expected<Prompt, ApiError> ParsePrompt(const boost::json::value& value,
                                            std::string_view param);

}  // namespace kvroute::api
