#include "api/stream_chunks.h"

#include <utility>

#include "api/sse_writer.h"

namespace kvroute::api {
namespace {

std::string_view ChunkObject(Endpoint endpoint) {
  return endpoint == Endpoint::kChatCompletions ? "chat.completion.chunk" : "text_completion";
}

boost::json::object Envelope(const ResponseMeta& meta, Endpoint endpoint,
                             boost::json::array choices) {
  boost::json::object out;
  out["id"] = meta.id;
  out["object"] = ChunkObject(endpoint);
  out["created"] = meta.created;
  out["model"] = meta.model;
  out["choices"] = std::move(choices);
  return out;
}

// Chat chunks are dumped by vLLM with exclude_unset=True: only the fields serving_chat.py
// assigns appear (stop_reason only on the finishing chunk, usage only when continuous).
boost::json::object ChatChunk(const ResponseMeta& meta, boost::json::object delta,
                              const Finish* finish, const Usage* usage) {
  boost::json::object choice;
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = nullptr;
  if (finish != nullptr) {
    choice["finish_reason"] = finish->reason;
    choice["stop_reason"] =
        finish->stop_string ? boost::json::value(*finish->stop_string) : boost::json::value();
  } else {
    choice["finish_reason"] = nullptr;
  }
  boost::json::object out =
      Envelope(meta, Endpoint::kChatCompletions, boost::json::array{std::move(choice)});
  if (usage != nullptr) out["usage"] = UsageJson(*usage, /*null_details=*/false);
  return out;
}

}  // namespace

boost::json::object ChatRoleChunk(const ResponseMeta& meta, const Usage* usage) {
  boost::json::object delta;
  delta["role"] = "assistant";
  delta["content"] = "";
  return ChatChunk(meta, std::move(delta), nullptr, usage);
}

boost::json::object ChatContentChunk(const ResponseMeta& meta, std::string_view text,
                                     const Finish* finish, const Usage* usage) {
  boost::json::object delta;
  delta["content"] = text;
  return ChatChunk(meta, std::move(delta), finish, usage);
}

// Completion chunks are dumped with exclude_unset=False: every field, nulls included.
boost::json::object CompletionChunk(const ResponseMeta& meta, std::string_view text,
                                    const Finish* finish, const Usage* usage) {
  boost::json::object choice;
  choice["index"] = 0;
  choice["text"] = text;
  choice["logprobs"] = nullptr;
  if (finish != nullptr) {
    choice["finish_reason"] = finish->reason;
    choice["stop_reason"] =
        finish->stop_string ? boost::json::value(*finish->stop_string) : boost::json::value();
  } else {
    choice["finish_reason"] = nullptr;
    choice["stop_reason"] = nullptr;
  }
  choice["prompt_token_ids"] = nullptr;
  choice["token_ids"] = nullptr;
  boost::json::object out =
      Envelope(meta, Endpoint::kCompletions, boost::json::array{std::move(choice)});
  if (usage != nullptr) {
    out["usage"] = UsageJson(*usage, /*null_details=*/true);
  } else {
    out["usage"] = nullptr;
  }
  return out;
}

boost::json::object UsageChunk(const ResponseMeta& meta, Endpoint endpoint, const Usage& usage) {
  boost::json::object out = Envelope(meta, endpoint, boost::json::array());
  out["usage"] = UsageJson(usage, /*null_details=*/false);
  return out;
}

std::string StreamErrorFrames(const ApiError& error) {
  std::string out = SseJson(error.ToJson());
  out += kSseDone;
  return out;
}

StreamEncoder::StreamEncoder(Endpoint endpoint, ResponseMeta meta,
                             std::optional<StreamOptions> options, std::int64_t prompt_tokens)
    : endpoint_(endpoint),
      meta_(std::move(meta)),
      options_(options),
      prompt_tokens_(prompt_tokens) {}

Usage StreamEncoder::UsageSoFar(std::int64_t completion_tokens) const {
  return Usage{.prompt_tokens = prompt_tokens_, .completion_tokens = completion_tokens};
}

std::string StreamEncoder::Start() {
  if (endpoint_ != Endpoint::kChatCompletions) return {};
  const bool continuous = options_ && options_->continuous_usage_stats;
  const Usage usage = UsageSoFar(0);
  return SseJson(ChatRoleChunk(meta_, continuous ? &usage : nullptr));
}

std::string StreamEncoder::Delta(std::string_view text, std::int64_t completion_tokens) {
  const bool continuous = options_ && options_->continuous_usage_stats;
  const Usage usage = UsageSoFar(completion_tokens);
  const Usage* u = continuous ? &usage : nullptr;
  return SseJson(endpoint_ == Endpoint::kChatCompletions
                     ? ChatContentChunk(meta_, text, nullptr, u)
                     : CompletionChunk(meta_, text, nullptr, u));
}

std::string StreamEncoder::End(std::string_view text, std::int64_t completion_tokens,
                               const Finish& finish, std::optional<std::int64_t> cached_tokens) {
  const bool continuous = options_ && options_->continuous_usage_stats;
  const Usage usage = UsageSoFar(completion_tokens);
  const Usage* u = continuous ? &usage : nullptr;
  std::string out =
      SseJson(endpoint_ == Endpoint::kChatCompletions ? ChatContentChunk(meta_, text, &finish, u)
                                                      : CompletionChunk(meta_, text, &finish, u));
  if (options_ && options_->include_usage) {
    Usage final_usage = usage;
    final_usage.cached_tokens = cached_tokens;
    out += SseJson(UsageChunk(meta_, endpoint_, final_usage));
  }
  out += kSseDone;
  return out;
}

}  // namespace kvroute::api
