// Parsing a raw HTTP request body into a JSON object, with the errors a client should see.
//
// Boost.JSON rejects invalid UTF-8 inside strings, nesting deeper than kMaxJsonDepth, and
// trailing garbage; each becomes a 400 with param null (the body as a whole is at fault),
// as vLLM answers a body its JSON decoder rejects.
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/object.hpp>
#include <expected>
#include <string_view>

#include "api/api_error.h"

namespace kvroute::api {

// Deeper nesting is rejected: no OpenAI request needs more than ~10 levels, and a bound keeps
// a hostile body from costing stack or memory.
inline constexpr std::size_t kMaxJsonDepth = 64;

// Parses `body`; a body that is valid JSON but not an object is a 400 too.
std::expected<boost::json::object, ApiError> ParseJsonObjectBody(std::string_view body);

}  // namespace kvroute::api
