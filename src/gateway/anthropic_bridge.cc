#include "gateway/anthropic_bridge.h"

#include <boost/json.hpp>

#include "api/anthropic_messages.h"
#include "api/responses.h"
#include "api/sse_writer.h"

namespace kvroute::gateway {
namespace {

namespace json = boost::json;

const json::object* ObjectAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_object() ? &v->get_object() : nullptr;
}

std::optional<std::string_view> StringAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return std::string_view(v->get_string());
}

std::optional<std::int64_t> IntAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  return std::nullopt;
}

// vLLM names the reasoning field "reasoning" (main) or "reasoning_content" (older).
std::string_view ReasoningOf(const json::object& message_or_delta) {
  if (auto r = StringAt(message_or_delta, "reasoning")) return *r;
  if (auto r = StringAt(message_or_delta, "reasoning_content")) return *r;
  return {};
}

// finish_reason + vLLM's stop_reason (a matched stop string, or a token id: not a sequence).
api::Finish FinishOf(const json::object& choice) {
  api::Finish f;
  if (auto r = StringAt(choice, "finish_reason")) f.reason = std::string(*r);
  if (auto s = StringAt(choice, "stop_reason")) f.stop_string = std::string(*s);
  return f;
}

// Tool arguments are JSON text; Anthropic wants the object. Text that is not an object
// (a model that produced broken JSON) becomes {} rather than failing the whole answer.
json::value InputOf(std::string_view arguments) {
  boost::system::error_code ec;
  json::value v = json::parse(arguments, ec);
  if (ec || !v.is_object()) return json::object();
  return v;
}

api::ApiError UpstreamError(int status, std::string_view body) {
  api::ApiError e;
  e.status = status;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (!ec && v.is_object()) {
    const json::object* inner = ObjectAt(v.get_object(), "error");
    const json::object& o = inner != nullptr ? *inner : v.get_object();
    if (auto m = StringAt(o, "message")) e.message = std::string(*m);
  }
  if (e.message.empty()) e.message = "the model server answered HTTP " + std::to_string(status);
  return e;
}

}  // namespace

std::string AnthropicMessageId(std::string_view chat_id) {
  for (std::string_view prefix : {"chatcmpl-", "cmpl-"}) {
    if (chat_id.starts_with(prefix)) {
      chat_id.remove_prefix(prefix.size());
      break;
    }
  }
  return std::string(api::kAnthropicIdPrefix) + std::string(chat_id);
}

std::expected<std::string, std::string> AnthropicMessageFromChat(std::string_view chat_body,
                                                                 std::string_view model) {
  boost::system::error_code ec;
  json::value v = json::parse(chat_body, ec);
  if (ec || !v.is_object()) return std::unexpected("the worker's answer is not a JSON object");
  const json::object& o = v.get_object();
  const json::value* choices = o.if_contains("choices");
  if (choices == nullptr || !choices->is_array() || choices->get_array().empty() ||
      !choices->get_array()[0].is_object()) {
    return std::unexpected("the worker's answer has no choice");
  }
  const json::object& choice = choices->get_array()[0].get_object();
  const json::object* message = ObjectAt(choice, "message");
  if (message == nullptr) return std::unexpected("the worker's answer has no message");

  json::array content;
  if (std::string_view reasoning = ReasoningOf(*message); !reasoning.empty()) {
    content.push_back({{"type", "thinking"}, {"thinking", reasoning}, {"signature", ""}});
  }
  if (auto text = StringAt(*message, "content"); text && !text->empty()) {
    content.push_back({{"type", "text"}, {"text", *text}});
  }
  if (const json::value* calls = message->if_contains("tool_calls"); calls && calls->is_array()) {
    for (const json::value& c : calls->get_array()) {
      if (!c.is_object()) continue;
      const json::object* fn = ObjectAt(c.get_object(), "function");
      json::object block;
      block["type"] = "tool_use";
      block["id"] = StringAt(c.get_object(), "id").value_or("");
      block["name"] = fn != nullptr ? StringAt(*fn, "name").value_or("") : "";
      block["input"] = InputOf(fn != nullptr ? StringAt(*fn, "arguments").value_or("{}") : "{}");
      content.push_back(std::move(block));
    }
  }

  api::Usage usage;
  if (const json::object* u = ObjectAt(o, "usage")) {
    usage.prompt_tokens = IntAt(*u, "prompt_tokens").value_or(0);
    usage.completion_tokens = IntAt(*u, "completion_tokens").value_or(0);
    if (const json::object* d = ObjectAt(*u, "prompt_tokens_details")) {
      usage.cached_tokens = IntAt(*d, "cached_tokens");
    }
  }
  api::ResponseMeta meta;
  meta.id = AnthropicMessageId(StringAt(o, "id").value_or(""));
  meta.model = std::string(model);
  json::object out = api::AnthropicResponseJson(meta, "", FinishOf(choice), usage);
  out["content"] = std::move(content);
  return json::serialize(out);
}

std::string AnthropicErrorFromUpstream(int status, std::string_view body) {
  return AnthropicErrorBody(UpstreamError(status, body));
}

std::string AnthropicErrorBody(const api::ApiError& error) {
  return json::serialize(api::AnthropicErrorJson(error));
}

std::string AnthropicStreamErrorEvent(const api::ApiError& error) {
  return api::SseJson(api::AnthropicErrorJson(error), "error");
}

AnthropicStreamTranslator::AnthropicStreamTranslator(std::string model, std::int64_t input_tokens)
    : model_(std::move(model)), input_tokens_(input_tokens) {}

void AnthropicStreamTranslator::Start(std::string_view chat_id, std::string* out) {
  started_ = true;
  json::object message;
  message["id"] = AnthropicMessageId(chat_id);
  message["type"] = "message";
  message["role"] = "assistant";
  message["model"] = model_;
  message["content"] = json::array();
  message["stop_reason"] = nullptr;
  message["stop_sequence"] = nullptr;
  message["usage"] = json::object{{"input_tokens", input_tokens_}, {"output_tokens", 0}};
  *out += api::SseJson(json::object{{"type", "message_start"}, {"message", std::move(message)}},
                       "message_start");
}

void AnthropicStreamTranslator::OpenBlock(Block type, std::string_view tool_id,
                                          std::string_view tool_name, std::string* out) {
  json::object block;
  switch (type) {
    case Block::kText:
      block = {{"type", "text"}, {"text", ""}};
      break;
    case Block::kThinking:
      block = {{"type", "thinking"}, {"thinking", ""}};
      break;
    case Block::kToolUse:
      block = {
          {"type", "tool_use"}, {"id", tool_id}, {"name", tool_name}, {"input", json::object()}};
      break;
    case Block::kNone:
      return;
  }
  *out += api::SseJson(json::object{{"type", "content_block_start"},
                                    {"index", next_index_},
                                    {"content_block", std::move(block)}},
                       "content_block_start");
  block_ = type;
}

void AnthropicStreamTranslator::CloseBlock(std::string* out) {
  if (block_ == Block::kNone) return;
  if (block_ == Block::kThinking) {
    // Anthropic closes a thinking block with its signature; an open model has none.
    *out += api::SseJson(json::object{{"type", "content_block_delta"},
                                      {"index", next_index_},
                                      {"delta", {{"type", "signature_delta"}, {"signature", ""}}}},
                         "content_block_delta");
  }
  *out += api::SseJson(json::object{{"type", "content_block_stop"}, {"index", next_index_}},
                       "content_block_stop");
  block_ = Block::kNone;
  tool_call_index_.reset();
  ++next_index_;
}

void AnthropicStreamTranslator::MessageDelta(std::string* out) {
  if (delta_sent_) return;
  delta_sent_ = true;
  api::Finish finish;
  if (!finish_reason_.empty()) finish.reason = finish_reason_;
  finish.stop_string = stop_string_;
  const std::string_view reason = api::AnthropicStopReason(finish);
  json::object delta;
  delta["stop_reason"] = reason;
  delta["stop_sequence"] =
      reason == "stop_sequence" ? json::value(*finish.stop_string) : json::value(nullptr);
  // Usage totals of the whole message: the worker's own counts when its usage chunk came.
  json::object usage{{"output_tokens", output_tokens_.value_or(deltas_)}};
  if (worker_input_tokens_) usage["input_tokens"] = *worker_input_tokens_;
  if (cached_tokens_) usage["cache_read_input_tokens"] = *cached_tokens_;
  *out += api::SseJson(
      json::object{
          {"type", "message_delta"}, {"delta", std::move(delta)}, {"usage", std::move(usage)}},
      "message_delta");
}

void AnthropicStreamTranslator::Stop(std::string* out) {
  if (!started_) Start("", out);
  CloseBlock(out);
  MessageDelta(out);
  *out += api::SseJson(json::object{{"type", "message_stop"}}, "message_stop");
  stopped_ = true;
}

void AnthropicStreamTranslator::OnEvent(const api::SseMessage& event, std::string* out) {
  if (stopped_ || failed_) return;
  if (event.done) {
    Stop(out);
    return;
  }
  boost::system::error_code ec;
  json::value v = json::parse(event.data, ec);
  if (ec || !v.is_object()) return;  // not a chat chunk: nothing to say
  const json::object& o = v.get_object();
  if (const json::object* err = ObjectAt(o, "error")) {
    // The worker failed mid-stream (vLLM sends the error as one more event).
    api::ApiError e;
    e.status = static_cast<int>(IntAt(*err, "code").value_or(500));
    if (e.status < 400 || e.status > 599) e.status = 500;
    e.message = std::string(StringAt(*err, "message").value_or("the model server failed"));
    *out += AnthropicStreamErrorEvent(e);
    failed_ = true;
    return;
  }
  if (!started_) Start(StringAt(o, "id").value_or(""), out);
  if (const json::object* u = ObjectAt(o, "usage")) {
    if (auto n = IntAt(*u, "completion_tokens")) output_tokens_ = *n;
    if (auto n = IntAt(*u, "prompt_tokens")) worker_input_tokens_ = *n;
    if (const json::object* d = ObjectAt(*u, "prompt_tokens_details")) {
      if (auto n = IntAt(*d, "cached_tokens")) cached_tokens_ = *n;
    }
  }
  const json::value* choices = o.if_contains("choices");
  if (choices == nullptr || !choices->is_array()) return;
  if (choices->get_array().empty()) {
    // The final usage chunk (stream_options.include_usage): the message is complete.
    if (output_tokens_) {
      CloseBlock(out);
      MessageDelta(out);
    }
    return;
  }
  const json::value& first = choices->get_array()[0];
  if (!first.is_object()) return;
  const json::object& choice = first.get_object();
  if (const json::object* delta = ObjectAt(choice, "delta")) {
    if (std::string_view r = ReasoningOf(*delta); !r.empty()) {
      if (block_ != Block::kThinking) {
        CloseBlock(out);
        OpenBlock(Block::kThinking, {}, {}, out);
      }
      *out += api::SseJson(json::object{{"type", "content_block_delta"},
                                        {"index", next_index_},
                                        {"delta", {{"type", "thinking_delta"}, {"thinking", r}}}},
                           "content_block_delta");
    }
    if (auto text = StringAt(*delta, "content"); text && !text->empty()) {
      if (block_ != Block::kText) {
        CloseBlock(out);
        OpenBlock(Block::kText, {}, {}, out);
      }
      *out += api::SseJson(json::object{{"type", "content_block_delta"},
                                        {"index", next_index_},
                                        {"delta", {{"type", "text_delta"}, {"text", *text}}}},
                           "content_block_delta");
      ++deltas_;
    }
    if (const json::value* calls = delta->if_contains("tool_calls"); calls && calls->is_array()) {
      for (const json::value& c : calls->get_array()) {
        if (!c.is_object()) continue;
        const json::object& call = c.get_object();
        const std::int64_t index = IntAt(call, "index").value_or(0);
        const json::object* fn = ObjectAt(call, "function");
        auto id = StringAt(call, "id");
        auto name = fn != nullptr ? StringAt(*fn, "name") : std::nullopt;
        // A call's first fragment carries its id and name: a new tool_use block.
        if (id && name && (block_ != Block::kToolUse || tool_call_index_ != index)) {
          CloseBlock(out);
          OpenBlock(Block::kToolUse, *id, *name, out);
          tool_call_index_ = index;
        }
        auto args = fn != nullptr ? StringAt(*fn, "arguments") : std::nullopt;
        if (args && !args->empty() && block_ == Block::kToolUse) {
          *out += api::SseJson(
              json::object{{"type", "content_block_delta"},
                           {"index", next_index_},
                           {"delta", {{"type", "input_json_delta"}, {"partial_json", *args}}}},
              "content_block_delta");
        }
      }
    }
  }
  if (auto reason = StringAt(choice, "finish_reason")) {
    finish_reason_ = std::string(*reason);
    if (auto s = StringAt(choice, "stop_reason")) stop_string_ = std::string(*s);
  }
}

void AnthropicStreamTranslator::OnEnd(std::string* out) {
  if (stopped_ || failed_) return;
  Stop(out);
}

}  // namespace kvroute::gateway
