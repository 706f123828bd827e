#include "api/tokenize_api.h"

#include <limits>
#include <utility>

#include "api/chat_request.h"
#include "api/json_body.h"
#include "api/json_fields.h"

namespace kvroute::api {
namespace {

std::expected<std::optional<std::string>, ApiError> OptModel(const boost::json::object& body) {
  return detail::OptString(body, "model", "model");
}

}  // namespace

std::expected<TokenizeRequest, ApiError> ParseTokenizeRequest(std::string_view body) {
  KVROUTE_API_ASSIGN_OR_RETURN(obj, ParseJsonObjectBody(body));
  TokenizeRequest request;
  KVROUTE_API_ASSIGN_OR_RETURN(model, OptModel(obj));
  request.model = std::move(model);

  const bool chat_form = detail::Find(obj, "messages") != nullptr;
  if (chat_form) {
    KVROUTE_API_ASSIGN_OR_RETURN(chat, ParseChatFields(obj));
    request.input = std::move(chat);
  } else {
    const boost::json::value* prompt = detail::Find(obj, "prompt");
    if (prompt == nullptr) {
      return std::unexpected(
          ApiError::InvalidRequest("Either 'prompt' or 'messages' is required.", "prompt"));
    }
    // vLLM's /tokenize takes the prompt as text; an empty one is allowed (zero tokens).
    if (!prompt->is_string())
      return std::unexpected(detail::WrongType("prompt", "a string", *prompt));
    request.input = std::string(prompt->get_string());
  }

  KVROUTE_API_ASSIGN_OR_RETURN(add_special,
                               detail::OptBool(obj, "add_special_tokens", "add_special_tokens"));
  // Chat prompts carry their special tokens in the rendered template.
  request.add_special_tokens = add_special.value_or(!chat_form);
  KVROUTE_API_ASSIGN_OR_RETURN(token_strs,
                               detail::OptBool(obj, "return_token_strs", "return_token_strs"));
  request.return_token_strs = token_strs.value_or(false);
  return request;
}

std::expected<DetokenizeRequest, ApiError> ParseDetokenizeRequest(std::string_view body) {
  KVROUTE_API_ASSIGN_OR_RETURN(obj, ParseJsonObjectBody(body));
  DetokenizeRequest request;
  KVROUTE_API_ASSIGN_OR_RETURN(model, OptModel(obj));
  request.model = std::move(model);
  const boost::json::value* tokens = detail::Find(obj, "tokens");
  if (tokens == nullptr) {
    return std::unexpected(ApiError::InvalidRequest("'tokens' is required.", "tokens"));
  }
  if (!tokens->is_array()) return std::unexpected(detail::WrongType("tokens", "an array", *tokens));
  const boost::json::array& arr = tokens->get_array();
  request.tokens.reserve(arr.size());
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string param = detail::IndexParam("tokens", i);
    if (arr[i].is_bool()) return std::unexpected(detail::WrongType(param, "an integer", arr[i]));
    KVROUTE_API_ASSIGN_OR_RETURN(id, detail::ToInt(arr[i], param));
    if (id < 0 || id > static_cast<std::int64_t>(std::numeric_limits<TokenId>::max())) {
      return std::unexpected(ApiError::InvalidRequest(
          "'" + param + "' is not a valid token id: " + std::to_string(id) + ".", param));
    }
    request.tokens.push_back(static_cast<TokenId>(id));
  }
  return request;
}

boost::json::object TokenizeResponseJson(
    const std::vector<TokenId>& tokens, std::int64_t max_model_len,
    const std::optional<std::vector<std::string>>& token_strs) {
  boost::json::object out;
  out["count"] = tokens.size();
  out["max_model_len"] = max_model_len;
  boost::json::array ids;
  ids.reserve(tokens.size());
  for (TokenId t : tokens) ids.emplace_back(t);
  out["tokens"] = std::move(ids);
  if (token_strs) {
    boost::json::array strs;
    strs.reserve(token_strs->size());
    for (const std::string& s : *token_strs) strs.emplace_back(s);
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;  // vLLM's model_dump() keeps the unset field as null
  }
  return out;
}

boost::json::object DetokenizeResponseJson(std::string_view text) {
  boost::json::object out;
  out["prompt"] = text;
  return out;
}

}  // namespace kvroute::api
