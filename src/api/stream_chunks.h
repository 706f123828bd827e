// Streaming (SSE) chunks of /v1/completions and /v1/chat/completions, as vLLM emits them,
// and StreamEncoder, which turns a generation's progress into ready-to-send SSE frames.
//
// Chat stream (vLLM serving_chat.py):
//   1. {"id","object":"chat.completion.chunk","created","model","choices":[{"index":0,
//       "delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}
//   2. content chunks: delta {"content": text}, finish_reason null
//   3. the last content chunk carries finish_reason (and stop_reason)
//   4. with include_usage: {..., "choices": [], "usage": {...}}
//   5. data: [DONE]
// Completion stream (serving_completion.py): text_completion chunks with
//   choices [{index, text, logprobs, finish_reason, stop_reason}]; no role chunk.
// continuous_usage_stats adds "usage" to every chunk with the counts so far.
//
// Thread safety: the chunk functions are pure; a StreamEncoder belongs to one stream.
#pragma once

#include <boost/json/object.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/api_error.h"
#include "api/generation_params.h"
#include "api/responses.h"

namespace kvroute::api {

// Chat: the opening chunk with delta {"role":"assistant","content":""}.
boost::json::object ChatRoleChunk(const ResponseMeta& meta, const Usage* usage);
// Chat: a content delta; `finish` set on the last one.
boost::json::object ChatContentChunk(const ResponseMeta& meta, std::string_view text,
                                     const Finish* finish, const Usage* usage);
// Completions: a text delta; `finish` set on the last one.
boost::json::object CompletionChunk(const ResponseMeta& meta, std::string_view text,
                                    const Finish* finish, const Usage* usage);
// Both: the final usage-only chunk, {"choices": []}.
boost::json::object UsageChunk(const ResponseMeta& meta, Endpoint endpoint, const Usage& usage);

// An error after the stream has started (the status line is already sent): vLLM sends the
// error object as one more event, then the terminator:
//   data: {"error": {...}}\n\n data: [DONE]\n\n
std::string StreamErrorFrames(const ApiError& error);

// Encodes one streamed response into SSE frames ("data: …\n\n").
//
//   StreamEncoder enc(Endpoint::kChatCompletions, meta, options, prompt_tokens);
//   out += enc.Start();                      // chat role chunk; empty for completions
//   out += enc.Delta("Hel", 1);              // text + completion tokens so far
//   out += enc.End("lo", 2, finish, cached_tokens);  // last delta, usage chunk, [DONE]
//
// REQUIRES: Start() once, then Delta() any number of times, then End() once.
class StreamEncoder {
 public:
  StreamEncoder(Endpoint endpoint, ResponseMeta meta, std::optional<StreamOptions> options,
                std::int64_t prompt_tokens);

  std::string Start();
  std::string Delta(std::string_view text, std::int64_t completion_tokens);
  // The last text delta (may be empty) with finish_reason, the usage chunk when
  // include_usage, and the [DONE] sentinel. `cached_tokens`: std::nullopt leaves
  // prompt_tokens_details out, as vLLM does without --enable-prompt-tokens-details.
  std::string End(std::string_view text, std::int64_t completion_tokens, const Finish& finish,
                  std::optional<std::int64_t> cached_tokens);

 private:
  Usage UsageSoFar(std::int64_t completion_tokens) const;

  Endpoint endpoint_;
  ResponseMeta meta_;
  std::optional<StreamOptions> options_;
  std::int64_t prompt_tokens_;
};

}  // namespace kvroute::api
