// ApiError: the one error value of the OpenAI-compatible HTTP surface, and its JSON shapes.
//
// Every parser in src/api/ returns std::expected<T, ApiError>; the transport (kvroute sim,
// kvroute serve) writes `status` as the HTTP status and ToJson() as the body. Request paths
// never throw: a bad request is a value, not an exception.
//
// Two JSON shapes exist in the wild and both are kept:
//   ToJson()      OpenAI's {"error": {"message","type","param","code"}} with OpenAI's types
//                 ("invalid_request_error", code "model_not_found", ...). vLLM main nests the
//                 same four keys under "error", so OpenAI SDKs read both the same way.
//   ToVllmJson()  vLLM's exact values: type "BadRequestError"/"NotFoundError"/..., and the
//                 HTTP status as an integer `code` — for `kvroute sim`, which must look like vLLM.
//
// Thread safety: plain value type.
#pragma once

#include <boost/json/object.hpp>
#include <cstddef>
#include <string>
#include <string_view>

namespace kvroute::api {

struct ApiError {
  int status = 400;     // HTTP status code
  std::string message;  // human-readable, safe to show to the client (never internals)
  std::string type;     // OpenAI error type, e.g. "invalid_request_error"
  std::string param;    // the offending request field ("messages[1].role"); empty → null
  std::string code;     // OpenAI machine code ("model_not_found"); empty → null

  // {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
  boost::json::object ToJson() const;
  // {"error": {"message", "type": <vLLM class name>, "param", "code": <status as int>}}
  boost::json::object ToVllmJson() const;
  // serialize(ToJson()).
  std::string Body() const;

  // 400 invalid_request_error naming `param`.
  static ApiError InvalidRequest(std::string message, std::string param = {});
  // 404 "The model `<model>` does not exist." code model_not_found, param "model".
  static ApiError ModelNotFound(std::string_view model);
  // 404 for an unknown path.
  static ApiError NotFound(std::string_view path);
  // 405 for a known path with the wrong method.
  static ApiError MethodNotAllowed(std::string_view method);
  // 413 request body larger than `limit_bytes`.
  static ApiError BodyTooLarge(std::size_t limit_bytes);
  // 401 missing or wrong bearer token; code invalid_api_key.
  static ApiError InvalidApiKey();
  // 503 the server cannot admit more work now (queue full); retryable.
  static ApiError Overloaded(std::string message = {});
  // 503 the server is draining and admits no new requests.
  static ApiError ShuttingDown();
  // 500. `message` must not leak internals; keep it generic.
  static ApiError Internal(std::string message = {});
};

// vLLM's exception class name for an HTTP status ("BadRequestError" for 400, ...).
std::string_view VllmErrorType(int status);

}  // namespace kvroute::api
