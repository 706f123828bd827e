// ChatCompletionRequest: a validated POST /v1/chat/completions body.
//
// The messages become tokenize::ChatRequest (what the chat template renders): list-of-parts
// content is flattened to text joined by "\n" (vLLM's string content format); tool calls keep
// their arguments as JSON text; `tools` is kept as the JSON text of the array.
//
// The parsed JSON object is kept in `body` so a proxy can forward it unchanged.
//
// Thread safety: plain value type; the parse functions are pure.
#pragma once

#include <boost/json/object.hpp>
#include <expected>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/generation_params.h"
#include "tokenize/tokenizer.h"

namespace kvroute::api {

struct ChatCompletionRequest {
  GenerationParams params;  // max_tokens = max_completion_tokens if given, else max_tokens
  tokenize::ChatRequest chat;
  boost::json::object body;  // the original request, as parsed
};

std::expected<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(std::string_view body);
std::expected<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(boost::json::object body);

// Reads `messages`, `tools`, `add_generation_prompt` and `continue_final_message` of a chat
// body (shared with the chat form of /tokenize).
std::expected<tokenize::ChatRequest, ApiError> ParseChatFields(const boost::json::object& body);

}  // namespace kvroute::api
