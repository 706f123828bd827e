#include "api/chat_request.h"

#include <array>
#include <boost/json/serialize.hpp>
#include <utility>

#include "api/json_body.h"
#include "api/json_fields.h"

namespace kvroute::api {
namespace {

using detail::FieldParam;
using detail::Find;
using detail::IndexParam;
using detail::WrongType;

constexpr std::array<std::string_view, 5> kRoles = {"system", "user", "assistant", "tool",
                                                    "developer"};

bool IsKnownRole(std::string_view role) {
  for (std::string_view r : kRoles) {
    if (r == role) return true;
  }
  return false;
}

// String content, or an array of {type: "text", text} parts joined with "\n" (vLLM's
// "string" content format). Non-text parts (images, audio) are refused: kvroute routes
// text models and could not count their tokens.
std::expected<std::string, ApiError> ParseContent(const boost::json::value& content,
                                                  std::string_view param) {
  if (content.is_string()) return std::string(content.get_string());
  if (!content.is_array()) {
    return std::unexpected(WrongType(param, "a string or an array of content parts", content));
  }
  std::string text;
  const boost::json::array& parts = content.get_array();
  for (std::size_t j = 0; j < parts.size(); ++j) {
    const std::string part_param = IndexParam(param, j);
    if (!parts[j].is_object()) return std::unexpected(WrongType(part_param, "an object", parts[j]));
    const boost::json::object& part = parts[j].get_object();
    const std::string type_param = FieldParam(part_param, "type");
    KVROUTE_API_ASSIGN_OR_RETURN(type, detail::OptString(part, "type", type_param));
    if (!type) {
      return std::unexpected(
          ApiError::InvalidRequest("'" + type_param + "' is required.", type_param));
    }
    if (*type != "text") {
      return std::unexpected(ApiError::InvalidRequest(
          "Unsupported content part type '" + *type + "'; only 'text' is supported.", type_param));
    }
    const std::string text_param = FieldParam(part_param, "text");
    KVROUTE_API_ASSIGN_OR_RETURN(part_text, detail::OptString(part, "text", text_param));
    if (!part_text) {
      return std::unexpected(
          ApiError::InvalidRequest("'" + text_param + "' is required.", text_param));
    }
    if (j > 0) text += '\n';
    text += *part_text;
  }
  return text;
}

std::expected<tokenize::ToolCall, ApiError> ParseToolCall(const boost::json::value& value,
                                                          std::string_view param) {
  if (!value.is_object()) return std::unexpected(WrongType(param, "an object", value));
  const boost::json::object& obj = value.get_object();
  tokenize::ToolCall call;

  const std::string id_param = FieldParam(param, "id");
  KVROUTE_API_ASSIGN_OR_RETURN(id, detail::OptString(obj, "id", id_param));
  if (!id)
    return std::unexpected(ApiError::InvalidRequest("'" + id_param + "' is required.", id_param));
  call.id = std::move(*id);

  const std::string type_param = FieldParam(param, "type");
  KVROUTE_API_ASSIGN_OR_RETURN(type, detail::OptString(obj, "type", type_param));
  if (type && *type != "function") {
    return std::unexpected(ApiError::InvalidRequest(
        "'" + type_param + "' must be 'function', got '" + *type + "'.", type_param));
  }

  const std::string fn_param = FieldParam(param, "function");
  const boost::json::value* fn = Find(obj, "function");
  if (fn == nullptr) {
    return std::unexpected(ApiError::InvalidRequest("'" + fn_param + "' is required.", fn_param));
  }
  if (!fn->is_object()) return std::unexpected(WrongType(fn_param, "an object", *fn));
  const std::string name_param = FieldParam(fn_param, "name");
  KVROUTE_API_ASSIGN_OR_RETURN(name, detail::OptString(fn->get_object(), "name", name_param));
  if (!name) {
    return std::unexpected(
        ApiError::InvalidRequest("'" + name_param + "' is required.", name_param));
  }
  call.name = std::move(*name);

  const std::string args_param = FieldParam(fn_param, "arguments");
  const boost::json::value* args = Find(fn->get_object(), "arguments");
  if (args == nullptr) {
    return std::unexpected(
        ApiError::InvalidRequest("'" + args_param + "' is required.", args_param));
  }
  if (args->is_string()) {
    call.arguments_json = std::string(args->get_string());
  } else if (args->is_object()) {
    // Some clients send the arguments object itself instead of its JSON text; keep it as text.
    call.arguments_json = boost::json::serialize(*args);
  } else {
    return std::unexpected(WrongType(args_param, "a string", *args));
  }
  return call;
}

std::expected<tokenize::ChatMessage, ApiError> ParseMessage(const boost::json::value& value,
                                                            std::string_view param) {
  if (!value.is_object()) return std::unexpected(WrongType(param, "an object", value));
  const boost::json::object& obj = value.get_object();
  tokenize::ChatMessage message;

  const std::string role_param = FieldParam(param, "role");
  KVROUTE_API_ASSIGN_OR_RETURN(role, detail::OptString(obj, "role", role_param));
  if (!role) {
    return std::unexpected(
        ApiError::InvalidRequest("'" + role_param + "' is required.", role_param));
  }
  if (!IsKnownRole(*role)) {
    return std::unexpected(ApiError::InvalidRequest(
        "'" + role_param + "' must be one of system, user, assistant, tool, developer; got '" +
            *role + "'.",
        role_param));
  }
  message.role = std::move(*role);

  const std::string calls_param = FieldParam(param, "tool_calls");
  if (const boost::json::value* calls = Find(obj, "tool_calls")) {
    if (!calls->is_array()) return std::unexpected(WrongType(calls_param, "an array", *calls));
    const boost::json::array& arr = calls->get_array();
    for (std::size_t k = 0; k < arr.size(); ++k) {
      KVROUTE_API_ASSIGN_OR_RETURN(call, ParseToolCall(arr[k], IndexParam(calls_param, k)));
      message.tool_calls.push_back(std::move(call));
    }
  }

  const std::string content_param = FieldParam(param, "content");
  if (const boost::json::value* content = Find(obj, "content")) {
    KVROUTE_API_ASSIGN_OR_RETURN(text, ParseContent(*content, content_param));
    message.content = std::move(text);
  } else if (!(message.role == "assistant" && !message.tool_calls.empty())) {
    // Only an assistant turn that called tools may leave content out (OpenAI's rule).
    return std::unexpected(
        ApiError::InvalidRequest("'" + content_param + "' is required.", content_param));
  }

  KVROUTE_API_ASSIGN_OR_RETURN(
      tool_call_id, detail::OptString(obj, "tool_call_id", FieldParam(param, "tool_call_id")));
  message.tool_call_id = std::move(tool_call_id);
  KVROUTE_API_ASSIGN_OR_RETURN(name, detail::OptString(obj, "name", FieldParam(param, "name")));
  message.name = std::move(name);
  return message;
}

}  // namespace

std::expected<tokenize::ChatRequest, ApiError> ParseChatFields(const boost::json::object& body) {
  tokenize::ChatRequest chat;
  const boost::json::value* messages = Find(body, "messages");
  if (messages == nullptr) {
    return std::unexpected(ApiError::InvalidRequest("'messages' is required.", "messages"));
  }
  if (!messages->is_array()) return std::unexpected(WrongType("messages", "an array", *messages));
  const boost::json::array& arr = messages->get_array();
  if (arr.empty()) {
    return std::unexpected(ApiError::InvalidRequest("'messages' must not be empty.", "messages"));
  }
  chat.messages.reserve(arr.size());
  for (std::size_t i = 0; i < arr.size(); ++i) {
    KVROUTE_API_ASSIGN_OR_RETURN(message, ParseMessage(arr[i], IndexParam("messages", i)));
    chat.messages.push_back(std::move(message));
  }

  if (const boost::json::value* tools = Find(body, "tools")) {
    if (!tools->is_array()) return std::unexpected(WrongType("tools", "an array", *tools));
    const boost::json::array& tarr = tools->get_array();
    for (std::size_t i = 0; i < tarr.size(); ++i) {
      if (!tarr[i].is_object())
        return std::unexpected(WrongType(IndexParam("tools", i), "an object", tarr[i]));
    }
    if (!tarr.empty()) chat.tools_json = boost::json::serialize(tarr);
  }

  KVROUTE_API_ASSIGN_OR_RETURN(
      add_gen, detail::OptBool(body, "add_generation_prompt", "add_generation_prompt"));
  KVROUTE_API_ASSIGN_OR_RETURN(
      cont, detail::OptBool(body, "continue_final_message", "continue_final_message"));
  if (add_gen.value_or(false) && cont.value_or(false)) {
    return std::unexpected(ApiError::InvalidRequest(
        "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
        "continue_final_message"));
  }
  chat.continue_final_message = cont.value_or(false);
  // Continuing the final message means no new assistant header: the default flips.
  chat.add_generation_prompt = add_gen.value_or(!chat.continue_final_message);
  return chat;
}

std::expected<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(std::string_view body) {
  KVROUTE_API_ASSIGN_OR_RETURN(obj, ParseJsonObjectBody(body));
  return ParseChatCompletionRequest(std::move(obj));
}

std::expected<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(
    boost::json::object body) {
  KVROUTE_API_ASSIGN_OR_RETURN(params, ParseGenerationParams(body, Endpoint::kChatCompletions));
  KVROUTE_API_ASSIGN_OR_RETURN(chat, ParseChatFields(body));
  // Move-constructed so the object keeps the storage it was parsed into (a move-assignment
  // into a default-storage object would copy the whole body).
  return ChatCompletionRequest{
      .params = std::move(params), .chat = std::move(chat), .body = std::move(body)};
}

}  // namespace kvroute::api
