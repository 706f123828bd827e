// Null-safe reads of Kubernetes API JSON (Boost.JSON), shared by the pod and EndpointSlice
// reconcilers: a missing or mistyped field reads as absent, never throws. Internal to src/k8s/.
// Thread safety: pure functions.
#pragma once

#include <boost/json.hpp>

#include <expected>
#include <string>
#include <string_view>

namespace kvroute::k8s::json_read {

namespace json = boost::json;

inline const json::object* Obj(const json::value* v) { return v && v->is_object() ? &v->as_object() : nullptr; }
inline const json::value* Field(const json::object* o, std::string_view key) {
  if (!o) return nullptr;
  auto it = o->find(key);
  return it == o->end() ? nullptr : &it->value();
}
inline std::string Str(const json::object* o, std::string_view key) {
  const json::value* v = Field(o, key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}
// A boolean field; `absent` when missing or null (the API's "unknown").
inline bool Bool(const json::object* o, std::string_view key, bool absent) {
  const json::value* v = Field(o, key);
  return v && v->is_bool() ? v->as_bool() : absent;
}
inline std::expected<json::value, std::string> Parse(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return std::unexpected("not JSON: " + ec.message());
  return v;
}

}  // namespace kvroute::k8s::json_read
