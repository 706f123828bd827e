#include "api/json_fields.h"

#include <cmath>
#include <limits>

namespace kvroute::api::detail {

const boost::json::value* Find(const boost::json::object& obj, std::string_view key) {
  const boost::json::value* v = obj.if_contains(boost::json::string_view(key.data(), key.size()));
  if (v == nullptr || v->is_null()) return nullptr;
  return v;
}

std::string_view KindName(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::null:
      return "null";
    case boost::json::kind::bool_:
      return "a boolean";
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
      return "an integer";
    case boost::json::kind::double_:
      return "a number";
    case boost::json::kind::string:
      return "a string";
    case boost::json::kind::array:
      return "an array";
    case boost::json::kind::object:
      return "an object";
  }
  return "a value";
}

ApiError WrongType(std::string_view param, std::string_view expected,
                   const boost::json::value& got) {
  return ApiError::InvalidRequest("'" + std::string(param) + "' must be " + std::string(expected) +
                                      ", got " + std::string(KindName(got)) + ".",
                                  std::string(param));
}

std::expected<std::int64_t, ApiError> ToInt(const boost::json::value& value,
                                            std::string_view param) {
  auto too_large = [&] {
    return ApiError::InvalidRequest("'" + std::string(param) + "' is out of range.",
                                    std::string(param));
  };
  switch (value.kind()) {
    case boost::json::kind::int64:
      return value.get_int64();
    case boost::json::kind::uint64:
      // Boost.JSON only uses uint64 for values above INT64_MAX.
      if (value.get_uint64() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return std::unexpected(too_large());
      return static_cast<std::int64_t>(value.get_uint64());
    case boost::json::kind::double_: {
      const double d = value.get_double();
      if (std::trunc(d) != d) return std::unexpected(WrongType(param, "an integer", value));
      // 2^63 is exactly representable; anything at or beyond it does not fit.
      if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
        return std::unexpected(too_large());
      return static_cast<std::int64_t>(d);
    }
    default:
      return std::unexpected(WrongType(param, "an integer", value));
  }
}

std::expected<std::optional<std::string>, ApiError> OptString(const boost::json::object& obj,
                                                              std::string_view key,
                                                              std::string_view param) {
  const boost::json::value* v = Find(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return std::unexpected(WrongType(param, "a string", *v));
  return std::string(v->get_string());
}

std::expected<std::optional<bool>, ApiError> OptBool(const boost::json::object& obj,
                                                     std::string_view key, std::string_view param) {
  const boost::json::value* v = Find(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_bool()) return std::unexpected(WrongType(param, "a boolean", *v));
  return v->get_bool();
}

std::expected<std::optional<std::int64_t>, ApiError> OptInt(const boost::json::object& obj,
                                                            std::string_view key,
                                                            std::string_view param) {
  const boost::json::value* v = Find(obj, key);
  if (v == nullptr) return std::nullopt;
  auto i = ToInt(*v, param);
  if (!i) return std::unexpected(std::move(i.error()));
  return *i;
}

std::expected<std::optional<double>, ApiError> OptNumber(const boost::json::object& obj,
                                                         std::string_view key,
                                                         std::string_view param) {
  const boost::json::value* v = Find(obj, key);
  if (v == nullptr) return std::nullopt;
  switch (v->kind()) {
    case boost::json::kind::int64:
      return static_cast<double>(v->get_int64());
    case boost::json::kind::uint64:
      return static_cast<double>(v->get_uint64());
    case boost::json::kind::double_:
      if (!std::isfinite(v->get_double()))
        return std::unexpected(ApiError::InvalidRequest(
            "'" + std::string(param) + "' is out of range.", std::string(param)));
      return v->get_double();
    default:
      return std::unexpected(WrongType(param, "a number", *v));
  }
}

std::string IndexParam(std::string_view prefix, std::size_t index) {
  return std::string(prefix) + "[" + std::to_string(index) + "]";
}

std::string FieldParam(std::string_view prefix, std::string_view field) {
  return std::string(prefix) + "." + std::string(field);
}

}  // namespace kvroute::api::detail
