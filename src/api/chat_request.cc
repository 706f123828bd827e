#include "api/chat_request.h"

#include <openssl/evp.h>

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

// One image_url part: its identifier (the part's uuid, else ImageIdentifier of its URL).
std::expected<ImagePart, ApiError> ParseImagePart(const boost::json::object& part,
                                                  std::string_view param) {
  const std::string url_param = FieldParam(param, "image_url");
  const boost::json::value* image = Find(part, "image_url");
  std::optional<std::string> url;
  if (image != nullptr && image->is_null()) {
    // uuid-only part, handled below
  } else if (image != nullptr && image->is_string()) {
    url = std::string(image->get_string());
  } else if (image != nullptr && image->is_object()) {
    KVROUTE_API_ASSIGN_OR_RETURN(
        u, detail::OptString(image->get_object(), "url", FieldParam(url_param, "url")));
    url = std::move(u);
  } else if (image != nullptr) {
    return std::unexpected(WrongType(url_param, "an object", *image));
  }
  KVROUTE_API_ASSIGN_OR_RETURN(uuid, detail::OptString(part, "uuid", FieldParam(param, "uuid")));
  // vLLM accepts a part with a uuid and no image (`"image_url": null`): the client says the
  // engine has the item cached under that id. Without either there is nothing to key.
  if (uuid && !uuid->empty()) return ImagePart{.identifier = std::move(*uuid), .has_uuid = true};
  if (!url || url->empty()) {
    return std::unexpected(ApiError::InvalidRequest(
        "'" + FieldParam(url_param, "url") + "' is required.", FieldParam(url_param, "url")));
  }
  return ImagePart{.identifier = ImageIdentifier(*url)};
}

// String content, or an array of parts: {type: "text", text} parts joined with "\n" (vLLM's
// "string" content format), image_url parts (when accepted) as one placeholder line each in
// front of the text. Other parts (audio, video) are refused.
std::expected<std::string, ApiError> ParseContent(const boost::json::value& content,
                                                  std::string_view param,
                                                  const ImageOptions& options,
                                                  std::vector<ImagePart>* images) {
  if (content.is_string()) return std::string(content.get_string());
  if (!content.is_array()) {
    return std::unexpected(WrongType(param, "a string or an array of content parts", content));
  }
  std::string text;
  std::string placeholders;
  bool first_text = true;
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
    if (*type == "image_url" && options.accept) {
      KVROUTE_API_ASSIGN_OR_RETURN(image, ParseImagePart(part, part_param));
      images->push_back(std::move(image));
      placeholders += options.placeholder;
      placeholders += '\n';
      continue;
    }
    if (*type != "text") {
      return std::unexpected(ApiError::InvalidRequest(
          "Unsupported content part type '" + *type + "'; only 'text'" +
              (options.accept ? " and 'image_url' are" : " is") + " supported.",
          type_param));
    }
    const std::string text_param = FieldParam(part_param, "text");
    KVROUTE_API_ASSIGN_OR_RETURN(part_text, detail::OptString(part, "text", text_param));
    if (!part_text) {
      return std::unexpected(
          ApiError::InvalidRequest("'" + text_param + "' is required.", text_param));
    }
    if (!first_text) text += '\n';
    first_text = false;
    text += *part_text;
  }
  return placeholders + text;
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
                                                            std::string_view param,
                                                            const ImageOptions& options,
                                                            std::vector<ImagePart>* images) {
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
    KVROUTE_API_ASSIGN_OR_RETURN(text, ParseContent(*content, content_param, options, images));
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

std::expected<tokenize::ChatRequest, ApiError> ParseChatFields(const boost::json::object& body,
                                                               const ImageOptions& options,
                                                               std::vector<ImagePart>* images) {
  std::vector<ImagePart> unused;
  if (images == nullptr) images = &unused;
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
    KVROUTE_API_ASSIGN_OR_RETURN(message,
                                 ParseMessage(arr[i], IndexParam("messages", i), options, images));
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

std::expected<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(
    std::string_view body, const ImageOptions& images) {
  KVROUTE_API_ASSIGN_OR_RETURN(obj, ParseJsonObjectBody(body));
  return ParseChatCompletionRequest(std::move(obj), images);
}

std::expected<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(
    boost::json::object body, const ImageOptions& options) {
  KVROUTE_API_ASSIGN_OR_RETURN(params, ParseGenerationParams(body, Endpoint::kChatCompletions));
  std::vector<ImagePart> images;
  KVROUTE_API_ASSIGN_OR_RETURN(chat, ParseChatFields(body, options, &images));
  // Move-constructed so the object keeps the storage it was parsed into (a move-assignment
  // into a default-storage object would copy the whole body).
  return ChatCompletionRequest{.params = std::move(params),
                               .chat = std::move(chat),
                               .body = std::move(body),
                               .images = std::move(images)};
}

std::string ImageIdentifier(std::string_view url) {
  const bool data = url.starts_with("data:");
  std::string_view material = url;
  if (data) {
    const std::size_t comma = url.find(',');
    if (comma != std::string_view::npos) material = url.substr(comma + 1);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(material.data(), material.size(), digest, &len, EVP_sha256(), nullptr);
  std::string out = data ? "kvimg-" : "kvurl-";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned int i = 0; i < 16 && i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

void SetImageUuids(boost::json::object* body, const std::vector<ImagePart>& images) {
  boost::json::value* messages = body->if_contains("messages");
  if (messages == nullptr || !messages->is_array()) return;
  std::size_t next = 0;
  for (boost::json::value& m : messages->get_array()) {
    boost::json::value* content = m.is_object() ? m.get_object().if_contains("content") : nullptr;
    if (content == nullptr || !content->is_array()) continue;
    for (boost::json::value& part : content->get_array()) {
      if (!part.is_object()) continue;
      boost::json::object& p = part.get_object();
      const boost::json::value* type = p.if_contains("type");
      if (type == nullptr || !type->is_string() || type->get_string() != "image_url") continue;
      if (next >= images.size()) return;
      const ImagePart& image = images[next++];
      if (!image.has_uuid) p["uuid"] = image.identifier;
    }
  }
}

}  // namespace kvroute::api
