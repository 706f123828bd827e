#include "api/generation_params.h"

#include <utility>

#include "api/json_fields.h"

namespace kvroute::api {
namespace {

using detail::Find;
using detail::OptBool;
using detail::OptInt;
using detail::OptNumber;
using detail::OptString;
using detail::WrongType;

std::expected<std::optional<std::int64_t>, ApiError> NonNegative(std::optional<std::int64_t> value,
                                                                 std::string_view param) {
  if (value && *value < 0) {
    return std::unexpected(ApiError::InvalidRequest("'" + std::string(param) +
                                                        "' must be a non-negative integer, got " +
                                                        std::to_string(*value) + ".",
                                                    std::string(param)));
  }
  return value;
}

std::expected<std::vector<std::string>, ApiError> ParseStop(const boost::json::object& body) {
  std::vector<std::string> stop;
  const boost::json::value* v = Find(body, "stop");
  if (v == nullptr) return stop;
  if (v->is_string()) {
    stop.emplace_back(v->get_string());
    return stop;
  }
  if (!v->is_array()) return std::unexpected(WrongType("stop", "a string or an array", *v));
  const auto& arr = v->get_array();
  for (std::size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_string())
      return std::unexpected(WrongType(detail::IndexParam("stop", i), "a string", arr[i]));
    stop.emplace_back(arr[i].get_string());
  }
  return stop;
}

std::expected<std::optional<StreamOptions>, ApiError> ParseStreamOptions(
    const boost::json::object& body) {
  const boost::json::value* v = Find(body, "stream_options");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return std::unexpected(WrongType("stream_options", "an object", *v));
  const auto& obj = v->get_object();
  StreamOptions options;
  KVROUTE_API_ASSIGN_OR_RETURN(include_usage,
                               OptBool(obj, "include_usage", "stream_options.include_usage"));
  KVROUTE_API_ASSIGN_OR_RETURN(
      continuous, OptBool(obj, "continuous_usage_stats", "stream_options.continuous_usage_stats"));
  options.include_usage = include_usage.value_or(true);
  options.continuous_usage_stats = continuous.value_or(false);
  return options;
}

}  // namespace

std::expected<GenerationParams, ApiError> ParseGenerationParams(const boost::json::object& body,
                                                                Endpoint endpoint) {
  GenerationParams p;

  const boost::json::value* model = Find(body, "model");
  if (model == nullptr) {
    return std::unexpected(ApiError::InvalidRequest("'model' is required.", "model"));
  }
  if (!model->is_string()) return std::unexpected(WrongType("model", "a string", *model));
  if (model->get_string().empty()) {
    return std::unexpected(ApiError::InvalidRequest("'model' must not be empty.", "model"));
  }
  p.model = std::string(model->get_string());

  KVROUTE_API_ASSIGN_OR_RETURN(max_tokens_raw, OptInt(body, "max_tokens", "max_tokens"));
  KVROUTE_API_ASSIGN_OR_RETURN(max_tokens, NonNegative(max_tokens_raw, "max_tokens"));
  p.max_tokens = max_tokens;
  if (endpoint == Endpoint::kChatCompletions) {
    // The chat API renamed max_tokens; the new name wins when both are given (vLLM).
    KVROUTE_API_ASSIGN_OR_RETURN(mct_raw,
                                 OptInt(body, "max_completion_tokens", "max_completion_tokens"));
    KVROUTE_API_ASSIGN_OR_RETURN(mct, NonNegative(mct_raw, "max_completion_tokens"));
    if (mct) p.max_tokens = mct;
  }

  KVROUTE_API_ASSIGN_OR_RETURN(stream, OptBool(body, "stream", "stream"));
  p.stream = stream.value_or(false);
  KVROUTE_API_ASSIGN_OR_RETURN(stream_options, ParseStreamOptions(body));
  if (stream_options && !p.stream) {
    // vLLM tests the raw dict's truthiness, so an empty {} passes and is then meaningless.
    if (!Find(body, "stream_options")->get_object().empty()) {
      return std::unexpected(ApiError::InvalidRequest(
          "Stream options can only be defined when `stream=True`.", "stream_options"));
    }
    stream_options.reset();
  }
  p.stream_options = stream_options;

  KVROUTE_API_ASSIGN_OR_RETURN(ignore_eos, OptBool(body, "ignore_eos", "ignore_eos"));
  p.ignore_eos = ignore_eos.value_or(false);
  KVROUTE_API_ASSIGN_OR_RETURN(seed, OptInt(body, "seed", "seed"));
  p.seed = seed;

  KVROUTE_API_ASSIGN_OR_RETURN(temperature, OptNumber(body, "temperature", "temperature"));
  if (temperature && *temperature < 0.0) {
    return std::unexpected(ApiError::InvalidRequest(
        "'temperature' must be non-negative, got " + std::to_string(*temperature) + ".",
        "temperature"));
  }
  p.temperature = temperature;
  KVROUTE_API_ASSIGN_OR_RETURN(top_p, OptNumber(body, "top_p", "top_p"));
  if (top_p && !(*top_p > 0.0 && *top_p <= 1.0)) {
    return std::unexpected(ApiError::InvalidRequest(
        "'top_p' must be in (0, 1], got " + std::to_string(*top_p) + ".", "top_p"));
  }
  p.top_p = top_p;

  KVROUTE_API_ASSIGN_OR_RETURN(n, OptInt(body, "n", "n"));
  if (n && *n != 1) {
    return std::unexpected(
        ApiError::InvalidRequest("Only n=1 is supported, got n=" + std::to_string(*n) + ".", "n"));
  }

  KVROUTE_API_ASSIGN_OR_RETURN(stop, ParseStop(body));
  p.stop = std::move(stop);
  KVROUTE_API_ASSIGN_OR_RETURN(user, OptString(body, "user", "user"));
  p.user = std::move(user);

  KVROUTE_API_ASSIGN_OR_RETURN(cache_salt, OptString(body, "cache_salt", "cache_salt"));
  if (cache_salt && cache_salt->empty()) {
    return std::unexpected(ApiError::InvalidRequest(
        "Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt"));
  }
  p.cache_salt = std::move(cache_salt);

  if (const boost::json::value* kv = Find(body, "kv_transfer_params")) {
    if (!kv->is_object()) return std::unexpected(WrongType("kv_transfer_params", "an object", *kv));
    p.kv_transfer_params = kv->get_object();
  }
  return p;
}

}  // namespace kvroute::api
