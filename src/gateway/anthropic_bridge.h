// AnthropicBridge: the answer side of `POST /v1/messages` on kvroute serve. The request is
// forwarded to the worker as an OpenAI chat completion (api::OpenAiChatBody); this file turns
// what the worker answers back into the Anthropic Messages API:
//
//   chat completion JSON        → {"type": "message", "content": [thinking?, text?,
//                                  tool_use*], "stop_reason", "stop_sequence", "usage"}
//   chat completion SSE chunks  → message_start, then per content block content_block_start,
//                                  content_block_delta* (text_delta | thinking_delta +
//                                  signature_delta | input_json_delta), content_block_stop,
//                                  then message_delta (stop_reason, usage: output and,
//                                  from the worker's usage chunk, input and cached tokens),
//                                  message_stop
//   an OpenAI/vLLM error body   → {"type": "error", "error": {"type", "message"}}
//   an error after the stream started → "event: error" with the same object
//
// The mapping follows vLLM's own /v1/messages (vllm/entrypoints/anthropic): finish_reason
// stop → end_turn (stop_sequence when vLLM's stop_reason names a matched stop string),
// length → max_tokens, tool_calls → tool_use; reasoning → a thinking block; message ids
// "msg_" + the chat completion's hex id.
//
// Thread safety: the functions are pure; an AnthropicStreamTranslator belongs to one stream.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include "api/api_error.h"
#include "api/sse_parser.h"

namespace kvroute::gateway {

// "msg_<hex>" from a chat completion id ("chatcmpl-<hex>" or anything else).
std::string AnthropicMessageId(std::string_view chat_id);

// A non-streaming chat completion body → the Messages response body. `model` is the name
// the client asked for. Error: the body is not a chat completion.
std::expected<std::string, std::string> AnthropicMessageFromChat(std::string_view chat_body,
                                                                 std::string_view model);

// A worker's error answer (OpenAI or vLLM error JSON, or anything) → the Anthropic error
// body for `status`; the message is the worker's when it has one.
std::string AnthropicErrorFromUpstream(int status, std::string_view body);

// kvroute's own error in the Anthropic shape.
std::string AnthropicErrorBody(const api::ApiError& error);

// Anthropic's in-stream error event ("event: error").
std::string AnthropicStreamErrorEvent(const api::ApiError& error);

// Turns one chat completion SSE stream into a Messages SSE stream, event by event.
// REQUIRES: OnEvent for each upstream event in order, then OnEnd once.
class AnthropicStreamTranslator {
 public:
  // `input_tokens`: kvroute's count of the prompt (message_start needs it before the
  // worker's usage arrives at the end).
  AnthropicStreamTranslator(std::string model, std::int64_t input_tokens);

  // Appends the frames one upstream event becomes (often none, e.g. the role chunk).
  void OnEvent(const api::SseMessage& event, std::string* out);
  // The upstream ended: appends whatever a well-formed message still lacks (closing block,
  // message_delta, message_stop) unless the stream already stopped or failed.
  void OnEnd(std::string* out);

  bool stopped() const { return stopped_; }
  bool failed() const { return failed_; }

 private:
  enum class Block { kNone, kText, kThinking, kToolUse };

  void Start(std::string_view chat_id, std::string* out);
  void OpenBlock(Block type, std::string_view tool_id, std::string_view tool_name,
                 std::string* out);
  void CloseBlock(std::string* out);
  void MessageDelta(std::string* out);
  void Stop(std::string* out);

  const std::string model_;
  const std::int64_t input_tokens_;
  bool started_ = false;
  bool delta_sent_ = false;
  bool stopped_ = false;
  bool failed_ = false;
  Block block_ = Block::kNone;
  int next_index_ = 0;                           // index of the next content block
  std::optional<std::int64_t> tool_call_index_;  // the open tool_use block's OpenAI index
  std::string finish_reason_;
  std::optional<std::string> stop_string_;
  std::optional<std::int64_t> output_tokens_;  // from the worker's usage chunk
  std::optional<std::int64_t> worker_input_tokens_;
  std::optional<std::int64_t> cached_tokens_;
  std::int64_t deltas_ = 0;  // fallback count when no usage arrives
};

}  // namespace kvroute::gateway
