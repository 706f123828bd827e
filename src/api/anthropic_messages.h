// The Anthropic Messages API (POST /v1/messages) on top of the same pieces as the OpenAI
// surface: request parsing into tokenize::ChatRequest + GenerationParams, the non-streaming
// response, and the named SSE events of a streamed answer.
//
// Mapping to the chat template's shape (what an OpenAI-style chat template expects):
//   system (string or text blocks)        → a leading "system" message (blocks concatenated,
//                                           "x-anthropic-billing-header" blocks skipped: vLLM)
//   user text blocks                      → one "user" message (blocks joined with "\n")
//   user tool_result blocks               → one "tool" message each, tool_call_id = tool_use_id
//   assistant tool_use blocks             → tool_calls (arguments = JSON text of `input`)
//   tools [{name, description, input_schema}] → OpenAI tools [{type: "function",
//                                           function: {name, description, parameters}}]
// Images and documents are refused (400): kvroute cannot count their tokens.
//
// Stream (each frame "event: <type>\ndata: <json>\n\n"):
//   message_start, content_block_start, content_block_delta*, content_block_stop,
//   message_delta (stop_reason, output usage), message_stop.
//
// Thread safety: pure functions; an AnthropicStreamEncoder belongs to one stream.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include "api/api_error.h"
#include "api/generation_params.h"
#include "api/responses.h"
#include "tokenize/tokenizer.h"

namespace kvroute::api {

struct AnthropicRequest {
  // model, max_tokens (required, >= 1), stream, temperature ([0, 1]), top_p, stop
  // (= stop_sequences), user (= metadata.user_id). Fields the Messages API lacks stay unset.
  GenerationParams params;
  std::optional<std::int64_t> top_k;
  // tool_choice in OpenAI form: "auto" | "required" (any) | "none" | {"type": "function",
  // "function": {"name"}} (tool). Unset when the client sent none.
  std::optional<boost::json::value> tool_choice;
  tokenize::ChatRequest chat;
  boost::json::object body;  // the original request, as parsed
};

std::expected<AnthropicRequest, ApiError> ParseAnthropicRequest(std::string_view body);

// The OpenAI chat completion body kvroute forwards for a Messages request. Workers speak
// /v1/chat/completions (vLLM main also serves /v1/messages, but builds the very same
// ChatCompletionRequest internally; older vLLM, SGLang and `kvroute sim` serve only chat).
// Forwarding chat means the worker renders exactly the messages kvroute tokenized for routing.
// Keys: model, messages (role, content, tool_calls, tool_call_id), tools, tool_choice,
// max_tokens, stop, temperature, top_p, top_k, user, stream (+ stream_options.include_usage,
// so the final chunk carries output usage), and add_generation_prompt=false +
// continue_final_message=true when the last message is the assistant's (a prefill).
std::string OpenAiChatBody(const AnthropicRequest& request);

// {"type": "error", "error": {"type": <anthropic error type>, "message": ...}}
boost::json::object AnthropicErrorJson(const ApiError& error);
// "invalid_request_error" (400), "authentication_error" (401), "not_found_error" (404),
// "request_too_large" (413), "rate_limit_error" (429), "overloaded_error" (503), "api_error".
std::string_view AnthropicErrorType(int status);

// OpenAI finish reason → Anthropic stop_reason: stop → end_turn (stop_sequence when a stop
// string matched), length → max_tokens, tool_calls → tool_use.
std::string_view AnthropicStopReason(const Finish& finish);

inline constexpr std::string_view kAnthropicIdPrefix = "msg_";

// {"id","type":"message","role":"assistant","model","content":[{"type":"text","text"}],
//  "stop_reason","stop_sequence","usage":{"input_tokens","output_tokens"[,
//  "cache_read_input_tokens"]}}
boost::json::object AnthropicResponseJson(const ResponseMeta& meta, std::string_view text,
                                          const Finish& finish, const Usage& usage);

// Encodes one streamed Messages answer (a single text content block) into SSE frames.
// REQUIRES: Start() once, Delta() any number of times, End() once.
class AnthropicStreamEncoder {
 public:
  AnthropicStreamEncoder(ResponseMeta meta, std::int64_t input_tokens);

  // message_start + content_block_start.
  std::string Start();
  // content_block_delta with a text_delta; empty text produces nothing.
  std::string Delta(std::string_view text);
  // content_block_stop + message_delta + message_stop.
  std::string End(const Finish& finish, std::int64_t output_tokens);

 private:
  ResponseMeta meta_;
  std::int64_t input_tokens_;
};

}  // namespace kvroute::api
