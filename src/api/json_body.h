// Parsing a raw HTTP request body into a JSON object, with the errors a client should see.
//
// Boost.JSON rejects invalid UTF-8 inside strings, nesting deeper than kMaxJsonDepth, and
// trailing garbage; each becomes a 400 with param null (the body as a whole is at fault),
// as vLLM answers a body its JSON decoder rejects.
//
// Speed (issue 5: a turn-30 chat body is ~300 KB of message text full of "\n" escapes):
// Boost.JSON 1.81 handles the rest of a string byte by byte once it has seen one escape
// (~18 instructions per byte). The body is therefore parsed first by a small strict parser
// (ParseJsonFast) that scans string runs 16 bytes at a time and builds the same
// boost::json::value; it declines anything it is not sure of (every error, duplicate keys,
// very deep nesting) and Boost.JSON then parses the body as before, so errors and edge cases
// are Boost's by construction. Numbers are handed to Boost.JSON one token at a time.
//
// Memory: the returned object owns a boost::json::monotonic_resource sized from the body (a
// storage_ptr keeps it alive as long as the object or any value moved out of it), so the
// ~100 strings of a long chat cost one allocation instead of one each. Move-assigning it into
// an object with the default storage copies it (Boost.JSON's rule): move-construct instead.
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/storage_ptr.hpp>
#include <boost/json/value.hpp>
#include <expected>
#include <optional>
#include <string_view>

#include "api/api_error.h"

namespace kvroute::api {

// Deeper nesting is rejected: no OpenAI request needs more than ~10 levels, and a bound keeps
// a hostile body from costing stack or memory.
inline constexpr std::size_t kMaxJsonDepth = 64;

// Parses `body`; a body that is valid JSON but not an object is a 400 too.
std::expected<boost::json::object, ApiError> ParseJsonObjectBody(std::string_view body);

namespace detail {

// The fast path alone: the value Boost.JSON would parse from `text`, built in `sp`, or
// nullopt when it declines (invalid JSON, or a case it leaves to Boost.JSON). Exposed for
// tests, which check it against boost::json::parse.
std::optional<boost::json::value> ParseJsonFast(std::string_view text, boost::json::storage_ptr sp);

}  // namespace detail
}  // namespace kvroute::api
