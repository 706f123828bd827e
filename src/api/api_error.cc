#include "api/api_error.h"

#include <boost/json/serialize.hpp>
#include <string>
#include <utility>

namespace kvroute::api {
namespace {

boost::json::value NullIfEmpty(const std::string& s) {
  if (s.empty()) return nullptr;
  return boost::json::value(s);
}

ApiError Make(int status, std::string message, std::string type, std::string param,
              std::string code) {
  return ApiError{.status = status,
                  .message = std::move(message),
                  .type = std::move(type),
                  .param = std::move(param),
                  .code = std::move(code)};
}

}  // namespace

boost::json::object ApiError::ToJson() const {
  boost::json::object inner;
  inner["message"] = message;
  inner["type"] = type;
  inner["param"] = NullIfEmpty(param);
  inner["code"] = NullIfEmpty(code);
  boost::json::object outer;
  outer["error"] = std::move(inner);
  return outer;
}

boost::json::object ApiError::ToVllmJson() const {
  boost::json::object inner;
  inner["message"] = message;
  inner["type"] = VllmErrorType(status);
  inner["param"] = NullIfEmpty(param);
  inner["code"] = status;
  boost::json::object outer;
  outer["error"] = std::move(inner);
  return outer;
}

std::string ApiError::Body() const { return boost::json::serialize(ToJson()); }

ApiError ApiError::InvalidRequest(std::string message, std::string param) {
  return Make(400, std::move(message), "invalid_request_error", std::move(param), {});
}

ApiError ApiError::ModelNotFound(std::string_view model) {
  return Make(404, "The model `" + std::string(model) + "` does not exist.",
              "invalid_request_error", "model", "model_not_found");
}

ApiError ApiError::NotFound(std::string_view path) {
  return Make(404, "Not Found: " + std::string(path), "invalid_request_error", {}, "not_found");
}

ApiError ApiError::MethodNotAllowed(std::string_view method) {
  return Make(405, "Method Not Allowed: " + std::string(method), "invalid_request_error", {},
              "method_not_allowed");
}

ApiError ApiError::BodyTooLarge(std::size_t limit_bytes) {
  return Make(413,
              "Request body too large: the limit is " + std::to_string(limit_bytes) + " bytes.",
              "invalid_request_error", {}, "request_too_large");
}

ApiError ApiError::InvalidApiKey() {
  return Make(401, "Incorrect API key provided.", "invalid_request_error", {}, "invalid_api_key");
}

ApiError ApiError::Overloaded(std::string message) {
  if (message.empty()) message = "The server is overloaded; retry later.";
  return Make(503, std::move(message), "server_error", {}, "server_overloaded");
}

ApiError ApiError::ShuttingDown() {
  return Make(503, "The server is shutting down and accepts no new requests.", "server_error", {},
              "server_shutting_down");
}

ApiError ApiError::Internal(std::string message) {
  if (message.empty()) message = "Internal server error.";
  return Make(500, std::move(message), "server_error", {}, "internal_error");
}

std::string_view VllmErrorType(int status) {
  switch (status) {
    case 400:
      return "BadRequestError";
    case 401:
      return "UnauthorizedError";
    case 404:
      return "NotFoundError";
    case 405:
      return "MethodNotAllowedError";
    case 413:
      return "RequestEntityTooLargeError";
    case 429:
      return "TooManyRequestsError";
    case 501:
      return "NotImplementedError";
    case 503:
      return "ServiceUnavailableError";
    default:
      return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

}  // namespace kvroute::api
