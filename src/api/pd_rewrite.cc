#include "api/pd_rewrite.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <initializer_list>

namespace kvroute::api {

namespace {

// Copies `body` in its original key order, dropping `drop` keys; then sets `set` entries
// (replaced in place when present, appended otherwise). boost::json::object::erase moves the
// last entry into the hole, so erasing would reorder what the engine sees.
boost::json::object Rewrite(const boost::json::object& body,
                            std::initializer_list<std::string_view> drop,
                            const boost::json::object& set) {
  boost::json::object out;
  out.reserve(body.size() + set.size());
  for (const auto& kv : body) {
    bool dropped = false;
    for (std::string_view d : drop) dropped = dropped || kv.key() == d;
    if (dropped) continue;
    const boost::json::value* replacement = set.if_contains(kv.key());
    out.emplace(kv.key(), replacement != nullptr ? *replacement : kv.value());
  }
  for (const auto& kv : set) {
    if (!out.contains(kv.key())) out.emplace(kv.key(), kv.value());
  }
  return out;
}

}  // namespace

boost::json::object MakePrefillBody(const boost::json::object& client_body) {
  boost::json::object set{
      {"stream", false},
      // One token is the least a prefill can produce; the decoder generates the rest.
      {"max_tokens", 1},
      {"kv_transfer_params",
       {{"do_remote_decode", true},
        {"do_remote_prefill", false},
        {"remote_engine_id", nullptr},
        {"remote_block_ids", nullptr},
        {"remote_host", nullptr},
        {"remote_port", nullptr}}}};
  if (client_body.contains("max_completion_tokens")) set["max_completion_tokens"] = 1;
  return Rewrite(client_body, {"stream_options", "min_tokens", "min_completion_tokens"}, set);
}

boost::json::object MakeDecodeBody(const boost::json::object& client_body,
                                   const boost::json::object& prefill_kv_transfer_params) {
  return Rewrite(client_body, {},
                 boost::json::object{{"kv_transfer_params", prefill_kv_transfer_params}});
}

std::expected<boost::json::object, ApiError> ExtractKvTransferParams(
    std::string_view prefill_response_body) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(
      boost::json::string_view(prefill_response_body.data(), prefill_response_body.size()), ec);
  if (ec || !v.is_object()) {
    return std::unexpected(ApiError::Internal("The prefill server sent an invalid response."));
  }
  boost::json::value* kv = v.as_object().if_contains("kv_transfer_params");
  if (kv == nullptr || !kv->is_object()) {
    return std::unexpected(
        ApiError::Internal("The prefill server returned no kv_transfer_params."));
  }
  return std::move(kv->as_object());
}

}  // namespace kvroute::api
