#include "api/anthropic_messages.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <utility>
#include <vector>

#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/sse_writer.h"

namespace kvroute::api {
namespace {

using detail::FieldParam;
using detail::Find;
using detail::IndexParam;
using detail::WrongType;

ApiError Required(const std::string& param) {
  return ApiError::InvalidRequest("'" + param + "' is required.", param);
}

// The texts of `v`: a string as one text, or an array of text blocks (anything else is an
// error naming `param`).
std::expected<std::vector<std::string>, ApiError> TextBlocks(const boost::json::value& v,
                                                             std::string_view param) {
  if (v.is_string()) return std::vector<std::string>{std::string(v.get_string())};
  if (!v.is_array()) return std::unexpected(WrongType(param, "a string or an array of blocks", v));
  std::vector<std::string> texts;
  const auto& blocks = v.get_array();
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const std::string bp = IndexParam(param, i);
    if (!blocks[i].is_object()) return std::unexpected(WrongType(bp, "an object", blocks[i]));
    const auto& b = blocks[i].get_object();
    KVROUTE_API_ASSIGN_OR_RETURN(type, detail::OptString(b, "type", FieldParam(bp, "type")));
    if (type != "text") {
      return std::unexpected(
          ApiError::InvalidRequest("Only text blocks are supported here.", FieldParam(bp, "type")));
    }
    KVROUTE_API_ASSIGN_OR_RETURN(t, detail::OptString(b, "text", FieldParam(bp, "text")));
    if (!t) return std::unexpected(Required(FieldParam(bp, "text")));
    texts.push_back(std::move(*t));
  }
  return texts;
}

// Text of a string or of an array of {type: "text", text} blocks (joined with "\n").
std::expected<std::string, ApiError> TextOf(const boost::json::value& v, std::string_view param) {
  KVROUTE_API_ASSIGN_OR_RETURN(texts, TextBlocks(v, param));
  std::string text;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (i > 0) text += '\n';
    text += texts[i];
  }
  return text;
}

// The system prompt as vLLM's Messages endpoint builds it: a string as is; text blocks
// concatenated without separator, skipping Claude Code's "x-anthropic-billing-header" block
// (it carries a per-request hash that would defeat prefix caching).
std::expected<std::string, ApiError> SystemText(const boost::json::value& v) {
  KVROUTE_API_ASSIGN_OR_RETURN(texts, TextBlocks(v, "system"));
  if (v.is_string()) return std::move(texts[0]);
  std::string text;
  for (const std::string& t : texts) {
    if (!t.starts_with("x-anthropic-billing-header")) text += t;
  }
  return text;
}

// Appends the chat messages one Anthropic message becomes.
std::expected<void, ApiError> AppendMessage(const boost::json::value& v, std::string_view param,
                                            std::vector<tokenize::ChatMessage>& out) {
  if (!v.is_object()) return std::unexpected(WrongType(param, "an object", v));
  const auto& m = v.get_object();
  const std::string role_param = FieldParam(param, "role");
  KVROUTE_API_ASSIGN_OR_RETURN(role, detail::OptString(m, "role", role_param));
  if (!role) return std::unexpected(Required(role_param));
  if (*role != "user" && *role != "assistant") {
    return std::unexpected(ApiError::InvalidRequest(
        "'" + role_param + "' must be 'user' or 'assistant', got '" + *role + "'.", role_param));
  }
  const std::string content_param = FieldParam(param, "content");
  const boost::json::value* content = Find(m, "content");
  if (content == nullptr) return std::unexpected(Required(content_param));

  tokenize::ChatMessage message;
  message.role = *role;
  if (content->is_string()) {
    message.content = std::string(content->get_string());
    out.push_back(std::move(message));
    return {};
  }
  if (!content->is_array()) {
    return std::unexpected(WrongType(content_param, "a string or an array of blocks", *content));
  }
  std::vector<tokenize::ChatMessage> tool_results;
  bool has_text = false;
  const auto& blocks = content->get_array();
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const std::string bp = IndexParam(content_param, i);
    if (!blocks[i].is_object()) return std::unexpected(WrongType(bp, "an object", blocks[i]));
    const auto& b = blocks[i].get_object();
    const std::string type_param = FieldParam(bp, "type");
    KVROUTE_API_ASSIGN_OR_RETURN(type, detail::OptString(b, "type", type_param));
    if (!type) return std::unexpected(Required(type_param));
    if (*type == "text") {
      KVROUTE_API_ASSIGN_OR_RETURN(t, detail::OptString(b, "text", FieldParam(bp, "text")));
      if (!t) return std::unexpected(Required(FieldParam(bp, "text")));
      if (has_text) message.content += '\n';
      message.content += *t;
      has_text = true;
    } else if (*type == "tool_use" && *role == "assistant") {
      tokenize::ToolCall call;
      KVROUTE_API_ASSIGN_OR_RETURN(id, detail::OptString(b, "id", FieldParam(bp, "id")));
      KVROUTE_API_ASSIGN_OR_RETURN(name, detail::OptString(b, "name", FieldParam(bp, "name")));
      if (!id) return std::unexpected(Required(FieldParam(bp, "id")));
      if (!name) return std::unexpected(Required(FieldParam(bp, "name")));
      const boost::json::value* input = Find(b, "input");
      if (input != nullptr && !input->is_object())
        return std::unexpected(WrongType(FieldParam(bp, "input"), "an object", *input));
      call.id = std::move(*id);
      call.name = std::move(*name);
      call.arguments_json = input ? boost::json::serialize(*input) : "{}";
      message.tool_calls.push_back(std::move(call));
    } else if (*type == "tool_result" && *role == "user") {
      tokenize::ChatMessage result;
      result.role = "tool";
      KVROUTE_API_ASSIGN_OR_RETURN(
          id, detail::OptString(b, "tool_use_id", FieldParam(bp, "tool_use_id")));
      if (!id) return std::unexpected(Required(FieldParam(bp, "tool_use_id")));
      result.tool_call_id = std::move(*id);
      if (const boost::json::value* rc = Find(b, "content")) {
        KVROUTE_API_ASSIGN_OR_RETURN(text, TextOf(*rc, FieldParam(bp, "content")));
        result.content = std::move(text);
      }
      tool_results.push_back(std::move(result));
    } else if (*type == "thinking" || *type == "redacted_thinking") {
      // Earlier reasoning is not re-rendered by chat templates; dropping it is what they do.
    } else {
      return std::unexpected(ApiError::InvalidRequest(
          "Unsupported content block type '" + *type + "' in a " + *role + " message.",
          type_param));
    }
  }
  // Tool results answer the previous assistant turn, so they come before any new user text.
  for (auto& r : tool_results) out.push_back(std::move(r));
  if (has_text || !message.tool_calls.empty() || (tool_results.empty() && blocks.empty())) {
    out.push_back(std::move(message));
  }
  return {};
}

std::expected<std::string, ApiError> ToolsAsOpenAi(const boost::json::value& v) {
  if (!v.is_array()) return std::unexpected(WrongType("tools", "an array", v));
  boost::json::array out;
  const auto& tools = v.get_array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const std::string tp = IndexParam("tools", i);
    if (!tools[i].is_object()) return std::unexpected(WrongType(tp, "an object", tools[i]));
    const auto& t = tools[i].get_object();
    KVROUTE_API_ASSIGN_OR_RETURN(name, detail::OptString(t, "name", FieldParam(tp, "name")));
    if (!name) return std::unexpected(Required(FieldParam(tp, "name")));
    KVROUTE_API_ASSIGN_OR_RETURN(
        description, detail::OptString(t, "description", FieldParam(tp, "description")));
    boost::json::object fn;
    fn["name"] = *name;
    if (description) fn["description"] = *description;
    if (const boost::json::value* schema = Find(t, "input_schema")) {
      if (!schema->is_object())
        return std::unexpected(WrongType(FieldParam(tp, "input_schema"), "an object", *schema));
      fn["parameters"] = *schema;
    }
    out.push_back(boost::json::object{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out.empty() ? std::string() : boost::json::serialize(out);
}

// {"type": "auto" | "any" | "none" | "tool", "name"} → OpenAI's tool_choice.
std::expected<boost::json::value, ApiError> ToolChoiceAsOpenAi(const boost::json::value& v) {
  if (!v.is_object()) return std::unexpected(WrongType("tool_choice", "an object", v));
  const auto& c = v.get_object();
  KVROUTE_API_ASSIGN_OR_RETURN(type, detail::OptString(c, "type", "tool_choice.type"));
  if (!type) return std::unexpected(Required("tool_choice.type"));
  if (*type == "auto") return boost::json::value("auto");
  if (*type == "any") return boost::json::value("required");
  if (*type == "none") return boost::json::value("none");
  if (*type == "tool") {
    KVROUTE_API_ASSIGN_OR_RETURN(name, detail::OptString(c, "name", "tool_choice.name"));
    if (!name) return std::unexpected(Required("tool_choice.name"));
    return boost::json::value(
        boost::json::object{{"type", "function"}, {"function", {{"name", *name}}}});
  }
  return std::unexpected(ApiError::InvalidRequest(
      "'tool_choice.type' must be 'auto', 'any', 'tool' or 'none', got '" + *type + "'.",
      "tool_choice.type"));
}

boost::json::object ChatMessageJson(const tokenize::ChatMessage& m) {
  boost::json::object o;
  o["role"] = m.role;
  // An assistant turn made only of tool calls has no content (OpenAI's shape).
  if (!(m.role == "assistant" && m.content.empty() && !m.tool_calls.empty())) {
    o["content"] = m.content;
  }
  if (!m.tool_calls.empty()) {
    boost::json::array calls;
    for (const auto& c : m.tool_calls) {
      calls.push_back(
          boost::json::object{{"id", c.id},
                              {"type", "function"},
                              {"function", {{"name", c.name}, {"arguments", c.arguments_json}}}});
    }
    o["tool_calls"] = std::move(calls);
  }
  if (m.tool_call_id) o["tool_call_id"] = *m.tool_call_id;
  return o;
}

}  // namespace

std::string OpenAiChatBody(const AnthropicRequest& request) {
  const GenerationParams& p = request.params;
  boost::json::object o;
  o["model"] = p.model;
  boost::json::array messages;
  for (const auto& m : request.chat.messages) messages.push_back(ChatMessageJson(m));
  o["messages"] = std::move(messages);
  if (!request.chat.tools_json.empty()) {
    boost::system::error_code ec;
    boost::json::value tools = boost::json::parse(request.chat.tools_json, ec);
    if (!ec) o["tools"] = std::move(tools);
    // vLLM's Messages endpoint: tools without a tool_choice mean "auto".
    o["tool_choice"] = request.tool_choice.value_or(boost::json::value("auto"));
  } else if (request.tool_choice) {
    o["tool_choice"] = *request.tool_choice;
  }
  if (p.max_tokens) o["max_tokens"] = *p.max_tokens;
  if (!p.stop.empty()) {
    boost::json::array stop;
    for (const auto& s : p.stop) stop.push_back(boost::json::string(s));
    o["stop"] = std::move(stop);
  }
  if (p.temperature) o["temperature"] = *p.temperature;
  if (p.top_p) o["top_p"] = *p.top_p;
  if (request.top_k) o["top_k"] = *request.top_k;
  if (p.user) o["user"] = *p.user;
  o["stream"] = p.stream;
  if (p.stream) o["stream_options"] = boost::json::object{{"include_usage", true}};
  if (request.chat.continue_final_message) {
    o["add_generation_prompt"] = false;
    o["continue_final_message"] = true;
  }
  return boost::json::serialize(o);
}

std::expected<AnthropicRequest, ApiError> ParseAnthropicRequest(std::string_view body) {
  KVROUTE_API_ASSIGN_OR_RETURN(parsed, ParseJsonObjectBody(body));
  // Move-constructed so `body` keeps the storage it was parsed into (a move-assignment into a
  // default-storage object would deep-copy the whole request).
  AnthropicRequest r{.body = std::move(parsed)};
  const boost::json::object& obj = r.body;
  GenerationParams& p = r.params;

  KVROUTE_API_ASSIGN_OR_RETURN(model, detail::OptString(obj, "model", "model"));
  if (!model || model->empty()) return std::unexpected(Required("model"));
  p.model = std::move(*model);

  KVROUTE_API_ASSIGN_OR_RETURN(max_tokens, detail::OptInt(obj, "max_tokens", "max_tokens"));
  if (!max_tokens) return std::unexpected(Required("max_tokens"));
  if (*max_tokens < 1) {
    return std::unexpected(
        ApiError::InvalidRequest("'max_tokens' must be at least 1.", "max_tokens"));
  }
  p.max_tokens = *max_tokens;

  std::vector<tokenize::ChatMessage> messages;
  if (const boost::json::value* system = Find(obj, "system")) {
    KVROUTE_API_ASSIGN_OR_RETURN(text, SystemText(*system));
    if (!text.empty()) {
      messages.push_back(tokenize::ChatMessage{.role = "system", .content = std::move(text)});
    }
  }
  const boost::json::value* msgs = Find(obj, "messages");
  if (msgs == nullptr) return std::unexpected(Required("messages"));
  if (!msgs->is_array()) return std::unexpected(WrongType("messages", "an array", *msgs));
  if (msgs->get_array().empty()) {
    return std::unexpected(ApiError::InvalidRequest("'messages' must not be empty.", "messages"));
  }
  for (std::size_t i = 0; i < msgs->get_array().size(); ++i) {
    auto appended = AppendMessage(msgs->get_array()[i], IndexParam("messages", i), messages);
    if (!appended) return std::unexpected(std::move(appended.error()));
  }
  r.chat.messages = std::move(messages);
  if (const boost::json::value* tools = Find(obj, "tools")) {
    KVROUTE_API_ASSIGN_OR_RETURN(tools_json, ToolsAsOpenAi(*tools));
    r.chat.tools_json = std::move(tools_json);
  }
  // A trailing assistant message is a prefill the model continues (Anthropic semantics).
  if (r.chat.messages.back().role == "assistant") {
    r.chat.add_generation_prompt = false;
    r.chat.continue_final_message = true;
  }

  KVROUTE_API_ASSIGN_OR_RETURN(stream, detail::OptBool(obj, "stream", "stream"));
  p.stream = stream.value_or(false);
  KVROUTE_API_ASSIGN_OR_RETURN(temperature, detail::OptNumber(obj, "temperature", "temperature"));
  if (temperature && (*temperature < 0.0 || *temperature > 1.0)) {
    return std::unexpected(
        ApiError::InvalidRequest("'temperature' must be in [0, 1].", "temperature"));
  }
  p.temperature = temperature;
  KVROUTE_API_ASSIGN_OR_RETURN(top_p, detail::OptNumber(obj, "top_p", "top_p"));
  if (top_p && !(*top_p > 0.0 && *top_p <= 1.0)) {
    return std::unexpected(ApiError::InvalidRequest("'top_p' must be in (0, 1].", "top_p"));
  }
  p.top_p = top_p;
  KVROUTE_API_ASSIGN_OR_RETURN(top_k, detail::OptInt(obj, "top_k", "top_k"));
  if (top_k && *top_k < 0) {
    return std::unexpected(ApiError::InvalidRequest("'top_k' must be non-negative.", "top_k"));
  }
  r.top_k = top_k;

  if (const boost::json::value* stops = Find(obj, "stop_sequences")) {
    if (!stops->is_array()) return std::unexpected(WrongType("stop_sequences", "an array", *stops));
    for (std::size_t i = 0; i < stops->get_array().size(); ++i) {
      const auto& s = stops->get_array()[i];
      if (!s.is_string())
        return std::unexpected(WrongType(IndexParam("stop_sequences", i), "a string", s));
      p.stop.emplace_back(s.get_string());
    }
  }
  if (const boost::json::value* choice = Find(obj, "tool_choice")) {
    KVROUTE_API_ASSIGN_OR_RETURN(openai_choice, ToolChoiceAsOpenAi(*choice));
    r.tool_choice = std::move(openai_choice);
  }
  if (const boost::json::value* metadata = Find(obj, "metadata")) {
    if (!metadata->is_object())
      return std::unexpected(WrongType("metadata", "an object", *metadata));
    KVROUTE_API_ASSIGN_OR_RETURN(
        user, detail::OptString(metadata->get_object(), "user_id", "metadata.user_id"));
    p.user = std::move(user);
  }
  return r;
}

std::string_view AnthropicErrorType(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status < 500 ? "invalid_request_error" : "api_error";
  }
}

boost::json::object AnthropicErrorJson(const ApiError& error) {
  boost::json::object inner;
  inner["type"] = AnthropicErrorType(error.status);
  inner["message"] = error.message;
  boost::json::object out;
  out["type"] = "error";
  out["error"] = std::move(inner);
  return out;
}

std::string_view AnthropicStopReason(const Finish& finish) {
  if (finish.reason == "length") return "max_tokens";
  if (finish.reason == "tool_calls") return "tool_use";
  if (finish.stop_string) return "stop_sequence";
  return "end_turn";
}

namespace {

boost::json::value StopSequence(const Finish& finish) {
  if (finish.stop_string) return boost::json::value(*finish.stop_string);
  return nullptr;
}

}  // namespace

boost::json::object AnthropicResponseJson(const ResponseMeta& meta, std::string_view text,
                                          const Finish& finish, const Usage& usage) {
  boost::json::object out;
  out["id"] = meta.id;
  out["type"] = "message";
  out["role"] = "assistant";
  out["model"] = meta.model;
  out["content"] = boost::json::array{boost::json::object{{"type", "text"}, {"text", text}}};
  out["stop_reason"] = AnthropicStopReason(finish);
  out["stop_sequence"] = StopSequence(finish);
  boost::json::object u;
  u["input_tokens"] = usage.prompt_tokens;
  u["output_tokens"] = usage.completion_tokens;
  if (usage.cached_tokens) u["cache_read_input_tokens"] = *usage.cached_tokens;
  out["usage"] = std::move(u);
  return out;
}

AnthropicStreamEncoder::AnthropicStreamEncoder(ResponseMeta meta, std::int64_t input_tokens)
    : meta_(std::move(meta)), input_tokens_(input_tokens) {}

std::string AnthropicStreamEncoder::Start() {
  boost::json::object message;
  message["id"] = meta_.id;
  message["type"] = "message";
  message["role"] = "assistant";
  message["content"] = boost::json::array();
  message["model"] = meta_.model;
  message["stop_reason"] = nullptr;
  message["stop_sequence"] = nullptr;
  message["usage"] = boost::json::object{{"input_tokens", input_tokens_}, {"output_tokens", 0}};
  std::string out =
      SseJson(boost::json::object{{"type", "message_start"}, {"message", std::move(message)}},
              "message_start");
  out += SseJson(boost::json::object{{"type", "content_block_start"},
                                     {"index", 0},
                                     {"content_block", {{"type", "text"}, {"text", ""}}}},
                 "content_block_start");
  return out;
}

std::string AnthropicStreamEncoder::Delta(std::string_view text) {
  if (text.empty()) return {};
  return SseJson(boost::json::object{{"type", "content_block_delta"},
                                     {"index", 0},
                                     {"delta", {{"type", "text_delta"}, {"text", text}}}},
                 "content_block_delta");
}

std::string AnthropicStreamEncoder::End(const Finish& finish, std::int64_t output_tokens) {
  std::string out = SseJson(boost::json::object{{"type", "content_block_stop"}, {"index", 0}},
                            "content_block_stop");
  boost::json::object delta;
  delta["stop_reason"] = AnthropicStopReason(finish);
  delta["stop_sequence"] = StopSequence(finish);
  out += SseJson(boost::json::object{{"type", "message_delta"},
                                     {"delta", std::move(delta)},
                                     {"usage", {{"output_tokens", output_tokens}}}},
                 "message_delta");
  out += SseJson(boost::json::object{{"type", "message_stop"}}, "message_stop");
  return out;
}

}  // namespace kvroute::api
