// Typed, validated reads of optional request fields from a boost::json::object — the one place
// that decides what counts as "absent", "an integer", "a number" for every parser in src/api/.
//
// Rules (vLLM/pydantic's, so the same body is accepted or rejected the same way):
//   - a missing key and a JSON null are both "not given" (std::nullopt);
//   - an integer field takes a JSON integer, or a float with no fractional part (16.0);
//     true/false are not integers; values beyond int64 are "too large";
//   - a number field takes any JSON number; NaN/Inf cannot occur (JSON has none).
// Each error is a 400 naming `param`.
//
// Internal to src/api/. Thread safety: pure functions.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include "api/api_error.h"

namespace kvroute::api::detail {

// The value at `key`, or nullptr when the key is missing or null.
const boost::json::value* Find(const boost::json::object& obj, std::string_view key);

// A JSON kind in words, for error messages ("a string", "an array", ...).
std::string_view KindName(const boost::json::value& value);

ApiError WrongType(std::string_view param, std::string_view expected,
                   const boost::json::value& got);

std::expected<std::int64_t, ApiError> ToInt(const boost::json::value& value,
                                            std::string_view param);

std::expected<std::optional<std::string>, ApiError> OptString(const boost::json::object& obj,
                                                              std::string_view key,
                                                              std::string_view param);
std::expected<std::optional<bool>, ApiError> OptBool(const boost::json::object& obj,
                                                     std::string_view key, std::string_view param);
std::expected<std::optional<std::int64_t>, ApiError> OptInt(const boost::json::object& obj,
                                                            std::string_view key,
                                                            std::string_view param);
std::expected<std::optional<double>, ApiError> OptNumber(const boost::json::object& obj,
                                                         std::string_view key,
                                                         std::string_view param);

// "prefix[index]" and "prefix.field": OpenAI's way of naming nested params.
std::string IndexParam(std::string_view prefix, std::size_t index);
std::string FieldParam(std::string_view prefix, std::string_view field);

}  // namespace kvroute::api::detail

// Binds `var` to the value of a std::expected<T, ApiError> expression, or returns its error
// from the enclosing function (whose return type must be constructible from std::unexpected).
#define KVROUTE_API_ASSIGN_OR_RETURN(var, expr)                       \
  auto var##_or = (expr);                                             \
  if (!var##_or) return std::unexpected(std::move(var##_or.error())); \
  auto var = std::move(*var##_or)
