#include "api/json_body.h"

#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/value.hpp>
#include <string>

namespace kvroute::api {

std::expected<boost::json::object, ApiError> ParseJsonObjectBody(std::string_view body) {
  boost::json::parse_options options;
  options.max_depth = kMaxJsonDepth;
  // Strict JSON, as Python's json module parses it in vLLM: no comments, no trailing
  // commas; invalid UTF-8 is rejected by default.
  boost::system::error_code ec;
  boost::json::value value =
      boost::json::parse(boost::json::string_view(body.data(), body.size()), ec, {}, options);
  if (ec) {
    return std::unexpected(
        ApiError::InvalidRequest("The request body is not valid JSON: " + ec.message() + "."));
  }
  if (!value.is_object()) {
    return std::unexpected(ApiError::InvalidRequest("The request body must be a JSON object."));
  }
  return std::move(value.as_object());
}

}  // namespace kvroute::api
