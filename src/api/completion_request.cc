#include "api/completion_request.h"

#include <limits>
#include <utility>

#include "api/json_body.h"
#include "api/json_fields.h"

namespace kvroute::api {
namespace {

ApiError BatchNotSupported(std::size_t count) {
  return ApiError::InvalidRequest("Batched prompts are not supported: got " +
                                      std::to_string(count) +
                                      " prompts; send one prompt per request.",
                                  "prompt");
}

ApiError EmptyPrompt(std::string_view param) {
  return ApiError::InvalidRequest("'" + std::string(param) + "' must not be empty.",
                                  std::string(param));
}

// A token id list: every element an integer in [0, 2^32).
std::expected<std::vector<TokenId>, ApiError> ParseTokenIds(const boost::json::array& arr,
                                                            std::string_view param) {
  if (arr.empty()) return std::unexpected(EmptyPrompt(param));
  std::vector<TokenId> ids;
  ids.reserve(arr.size());
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string elem_param = detail::IndexParam(param, i);
    const boost::json::value& v = arr[i];
    if (!v.is_int64() && !v.is_uint64() && !v.is_double())
      return std::unexpected(detail::WrongType(elem_param, "an integer token id", v));
    KVROUTE_API_ASSIGN_OR_RETURN(id, detail::ToInt(v, elem_param));
    if (id < 0 || id > static_cast<std::int64_t>(std::numeric_limits<TokenId>::max())) {
      return std::unexpected(ApiError::InvalidRequest(
          "'" + elem_param + "' is not a valid token id: " + std::to_string(id) + ".", elem_param));
    }
    ids.push_back(static_cast<TokenId>(id));
  }
  return ids;
}

}  // namespace

std::expected<Prompt, ApiError> ParsePrompt(const boost::json::value& value,
                                            std::string_view param) {
  if (value.is_null()) {
    return std::unexpected(
        ApiError::InvalidRequest("'" + std::string(param) + "' is required.", std::string(param)));
  }
  if (value.is_string()) {
    // An empty text prompt is refused like vLLM ("Either prompt or prompt_embeds must be
    // provided and non-empty."): there is nothing to prefill.
    if (value.get_string().empty()) return std::unexpected(EmptyPrompt(param));
    return Prompt(std::string(value.get_string()));
  }
  if (!value.is_array()) {
    return std::unexpected(
        detail::WrongType(param, "a string, an array of strings or an array of token ids", value));
  }
  const boost::json::array& arr = value.get_array();
  if (arr.empty()) return std::unexpected(EmptyPrompt(param));
  const boost::json::value& first = arr.front();
  if (first.is_string()) {  // [string, ...]
    for (std::size_t i = 0; i < arr.size(); ++i) {
      if (!arr[i].is_string())
        return std::unexpected(detail::WrongType(detail::IndexParam(param, i), "a string", arr[i]));
    }
    if (arr.size() > 1) return std::unexpected(BatchNotSupported(arr.size()));
    if (first.get_string().empty()) return std::unexpected(EmptyPrompt(param));
    return Prompt(std::string(first.get_string()));
  }
  if (first.is_array()) {  // [[int, ...], ...]
    for (std::size_t i = 0; i < arr.size(); ++i) {
      if (!arr[i].is_array())
        return std::unexpected(
            detail::WrongType(detail::IndexParam(param, i), "an array of token ids", arr[i]));
    }
    if (arr.size() > 1) return std::unexpected(BatchNotSupported(arr.size()));
    KVROUTE_API_ASSIGN_OR_RETURN(ids,
                                 ParseTokenIds(first.get_array(), detail::IndexParam(param, 0)));
    return Prompt(std::move(ids));
  }
  KVROUTE_API_ASSIGN_OR_RETURN(ids, ParseTokenIds(arr, param));  // [int, ...]
  return Prompt(std::move(ids));
}

std::expected<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body) {
  KVROUTE_API_ASSIGN_OR_RETURN(obj, ParseJsonObjectBody(body));
  return ParseCompletionRequest(std::move(obj));
}

std::expected<CompletionRequest, ApiError> ParseCompletionRequest(boost::json::object body) {
  KVROUTE_API_ASSIGN_OR_RETURN(params, ParseGenerationParams(body, Endpoint::kCompletions));
  const boost::json::value* prompt_value = detail::Find(body, "prompt");
  if (prompt_value == nullptr) {
    return std::unexpected(ApiError::InvalidRequest("'prompt' is required.", "prompt"));
  }
  KVROUTE_API_ASSIGN_OR_RETURN(prompt, ParsePrompt(*prompt_value, "prompt"));
  KVROUTE_API_ASSIGN_OR_RETURN(echo, detail::OptBool(body, "echo", "echo"));

  // Move-constructed so the object keeps the storage it was parsed into (a move-assignment
  // into a default-storage object would copy the whole body).
  return CompletionRequest{.params = std::move(params),
                           .prompt = std::move(prompt),
                           .echo = echo.value_or(false),
                           .body = std::move(body)};
}

}  // namespace kvroute::api
