// Stream migration (issue 21), the pure half: what the proxy needs to resume a streamed
// request on another worker after its worker died mid-stream (Dynamo's request migration).
//
//   StreamedText          fed every relayed piece of the stream (OpenAI SSE, before any
//                         Anthropic translation): the generated text so far and its token
//                         events, bounded; says when the stream cannot be continued
//   BuildContinuation     the original body + that text → the continuation's body:
//                         completions: prompt + text; chat: messages + an assistant message
//                         holding the text, continue_final_message true,
//                         add_generation_prompt false (vLLM's parameters); max_tokens,
//                         max_completion_tokens and min_tokens reduced by the tokens streamed
//   ContinuationRelay     the continuation's SSE → what the client gets: its role-only first
//                         chunk dropped (the client had one), usage rewritten to the original
//                         request's view (prompt_tokens − streamed, completion_tokens +
//                         streamed; total unchanged)
//
// A token is one token event (a choice with text / delta content, the chat role chunk
// excepted): exact for vLLM and `kvroute sim`, which send one event per generated token; an
// engine that packs several tokens in one event (speculative decoding) makes the reduced
// max_tokens an upper bound.
//
// Thread safety: BuildContinuation is pure; a StreamedText or ContinuationRelay belongs to
// one stream, used from its lane.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/generation_params.h"
#include "api/sse_parser.h"

namespace kvroute::gateway {

class StreamedText {
 public:
  // Past this much text the stream is no longer continued (the continuation would repeat it
  // all as prompt; the buffer stays bounded).
  static constexpr std::size_t kMaxTextBytes = 1u << 20;

  explicit StreamedText(api::Endpoint endpoint) : endpoint_(endpoint) {}

  // One relayed piece of the stream's SSE bytes.
  void Feed(std::string_view piece);

  // The text so far, decoded from the JSON-escaped form it is kept in (call on migration);
  // nullopt if that form does not decode (the stream is then not continued).
  std::optional<std::string> text() const;
  std::uint64_t tokens() const { return tokens_; }
  // Why the stream cannot be continued (empty: it can): text over the bound, a delta kvroute
  // cannot replay (tool calls, reasoning, several choices), a malformed event.
  const std::string& unsupported() const { return unsupported_; }
  // The last relayed piece ended inside an event: the client holds its first half.
  bool mid_event() const { return !partial_.empty() || in_event_; }

 private:
  void Line(std::string_view line);
  void Event(std::string_view data);
  // Any event the fast path does not recognise (the role chunk, a JSON layout with spaces):
  // a full JSON parse.
  void ParsedEvent(std::string_view data);

  api::Endpoint endpoint_;
  // Lines are read in place (as SseTokenCounter does; api::SseParser's copies cost more than
  // the rest of this class): only a line cut between two pieces is held.
  std::string partial_;
  bool skip_lf_ = false;
  bool in_event_ = false;  // a data line was read, its event's blank line not yet
  // The text as the events carried it, JSON-escaped (a token's text is copied, never parsed:
  // a full parse of every event cost more than the rest of the relay).
  std::string escaped_;
  std::uint64_t tokens_ = 0;
  std::string unsupported_;
};

struct Continuation {
  enum class Kind {
    kSend,         // send `body` to another worker
    kComplete,     // every requested token was streamed: only the stream's end is owed
    kUnsupported,  // the request cannot be continued (`reason`)
  };
  Kind kind = Kind::kUnsupported;
  std::string body;
  std::string reason;
};

// The continuation of `original_body` (the OpenAI body forwarded to the worker) after
// `streamed_tokens` tokens whose text is `streamed_text`.
Continuation BuildContinuation(api::Endpoint endpoint, std::string_view original_body,
                               std::string_view streamed_text, std::uint64_t streamed_tokens);

class ContinuationRelay {
 public:
  // `streamed_tokens`: the tokens the client had before this continuation started.
  ContinuationRelay(api::Endpoint endpoint, std::uint64_t streamed_tokens)
      : endpoint_(endpoint), streamed_tokens_(streamed_tokens) {}

  // One piece of the continuation's SSE bytes → the bytes for the client (whole events only;
  // possibly empty).
  std::string Feed(std::string_view piece);

 private:
  void Event(const api::SseMessage& event, std::string* out);

  api::Endpoint endpoint_;
  std::uint64_t streamed_tokens_;
  api::SseParser parser_;
  std::vector<api::SseMessage> events_;
  bool role_dropped_ = false;
};

}  // namespace kvroute::gateway
