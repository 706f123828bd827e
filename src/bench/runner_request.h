// The wire side of one benchmark request, free of sockets so it is tested on its own:
//   - request bodies for /v1/chat/completions (messages) and /v1/completions (token ids),
//     always streamed with usage, ignore_eos and max_tokens, so every request produces
//     exactly the output length the workload asks for;
//   - StreamAccounting, which turns the SSE events of a streamed response, each stamped
//     with its arrival time, into a workload::RequestResult (TTFT, every inter-token gap,
//     E2E, token counts from usage) and the assistant's reply text (the agentic workload
//     appends it to the session's history).
//
// One content chunk counts as one token arrival (true of vLLM and kvroute sim, which send a
// chunk per token); chunks that arrive in the same socket read share a timestamp, so their
// gap is 0 — what the client really saw.
//
// Thread safety: pure functions; a StreamAccounting belongs to one request.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "workload/goodput.h"
#include "common/types.h"

namespace kvroute::bench {

struct Message {
  std::string role;  // system | user | assistant
  std::string content;
};

// JSON body of a streamed chat completion.
std::string ChatRequestBody(std::string_view model, std::span<const Message> messages,
                            std::uint32_t max_tokens);

// JSON body of a streamed completion whose prompt is token ids.
std::string CompletionRequestBody(std::string_view model, std::span<const TokenId> prompt,
                                  std::uint32_t max_tokens);

class StreamAccounting {
 public:
  // `start_s`: when the request was sent (seconds on the run's clock).
  explicit StreamAccounting(double start_s);

  // One SSE event's data (already split by api::SseParser), received at `now_s`. Returns
  // false when the event is not valid JSON or carries an error object; the request is then
  // failed with kind "stream".
  bool OnEvent(std::string_view data, double now_s);
  // `data: [DONE]` arrived.
  void OnDone(double now_s);

  // The finished result. `error_kind` empty means the transport ended cleanly; a stream
  // without [DONE] or without any content chunk is failed with kind "stream".
  workload::RequestResult Finish(double end_s, std::string_view error_kind = {});

  const std::string& reply() const { return reply_; }
  std::uint32_t content_chunks() const { return chunks_; }

 private:
  workload::RequestResult result_;
  std::string reply_;
  std::uint32_t chunks_ = 0;
  std::optional<double> last_chunk_s_;
  bool done_ = false;
  bool usage_seen_ = false;
  std::string stream_error_;
};

}  // namespace kvroute::bench
