#include "sim/kv_transfer_params.h"

#include <boost/json/array.hpp>
#include <limits>

namespace kvroute::sim {
namespace {

using api::ApiError;

constexpr const char* kParam = "kv_transfer_params";

ApiError Bad(const std::string& what) {
  return ApiError::InvalidRequest("Invalid kv_transfer_params: " + what + ".", kParam);
}

const boost::json::value* Get(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  return v == nullptr || v->is_null() ? nullptr : v;
}

std::expected<bool, ApiError> Flag(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = Get(o, key);
  if (v == nullptr) return false;
  if (!v->is_bool()) return std::unexpected(Bad("'" + std::string(key) + "' must be a boolean"));
  return v->get_bool();
}

std::expected<std::string, ApiError> RequiredString(const boost::json::object& o,
                                                    std::string_view key) {
  const boost::json::value* v = Get(o, key);
  if (v == nullptr || !v->is_string() || v->get_string().empty()) {
    return std::unexpected(Bad("'" + std::string(key) + "' must be a non-empty string"));
  }
  return std::string(v->get_string());
}

std::expected<std::int64_t, ApiError> Integer(const boost::json::value& v, std::string_view key) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64() && v.get_uint64() <= std::numeric_limits<std::int64_t>::max()) {
    return static_cast<std::int64_t>(v.get_uint64());
  }
  return std::unexpected(Bad("'" + std::string(key) + "' must be an integer"));
}

std::expected<std::vector<std::int32_t>, ApiError> BlockIds(const boost::json::object& o) {
  const boost::json::value* v = Get(o, "remote_block_ids");
  if (v == nullptr || !v->is_array() || v->get_array().empty()) {
    return std::unexpected(Bad("'remote_block_ids' must be a non-empty array of block ids"));
  }
  const boost::json::array* ids = &v->get_array();
  if (ids->front().is_array()) {  // one list per KV cache group
    if (ids->size() != 1 || ids->front().get_array().empty()) {
      return std::unexpected(Bad("'remote_block_ids' must name the blocks of one KV cache group"));
    }
    ids = &ids->front().get_array();
  }
  std::vector<std::int32_t> out;
  out.reserve(ids->size());
  for (const boost::json::value& id : *ids) {
    auto n = Integer(id, "remote_block_ids");
    if (!n) return std::unexpected(n.error());
    if (*n < 0 || *n > std::numeric_limits<std::int32_t>::max()) {
      return std::unexpected(Bad("block id " + std::to_string(*n) + " is out of range"));
    }
    out.push_back(static_cast<std::int32_t>(*n));
  }
  return out;
}

}  // namespace

std::expected<KvTransferRequest, ApiError> ParseKvTransferParams(
    const std::optional<boost::json::object>& params) {
  KvTransferRequest out;
  if (!params) return out;
  const boost::json::object& o = *params;
  auto remote_decode = Flag(o, "do_remote_decode");
  if (!remote_decode) return std::unexpected(remote_decode.error());
  auto remote_prefill = Flag(o, "do_remote_prefill");
  if (!remote_prefill) return std::unexpected(remote_prefill.error());
  if (*remote_decode && *remote_prefill) {
    return std::unexpected(Bad("do_remote_decode and do_remote_prefill cannot both be true"));
  }
  out.prefill_leg = *remote_decode;
  if (!*remote_prefill) return out;

  DecodeLegParams d;
  auto ids = BlockIds(o);
  if (!ids) return std::unexpected(ids.error());
  d.remote_block_ids = std::move(*ids);
  for (auto [key, field] :
       {std::pair<std::string_view, std::string*>{"remote_engine_id", &d.remote_engine_id},
        {"remote_request_id", &d.remote_request_id},
        {"remote_host", &d.remote_host}}) {
    auto s = RequiredString(o, key);
    if (!s) return std::unexpected(s.error());
    *field = std::move(*s);
  }
  const boost::json::value* port = Get(o, "remote_port");
  if (port == nullptr) return std::unexpected(Bad("'remote_port' is required"));
  auto p = Integer(*port, "remote_port");
  if (!p) return std::unexpected(p.error());
  if (*p < 1 || *p > 65535) return std::unexpected(Bad("'remote_port' must be in 1..65535"));
  d.remote_port = static_cast<int>(*p);
  if (const boost::json::value* tp = Get(o, "tp_size")) {
    auto t = Integer(*tp, "tp_size");
    if (!t) return std::unexpected(t.error());
    if (*t < 1 || *t > 1024) return std::unexpected(Bad("'tp_size' must be in 1..1024"));
    d.tp_size = static_cast<std::uint32_t>(*t);
  }
  out.decode = std::move(d);
  return out;
}

boost::json::object PrefillResponseParams(const PrefillIdentity& self,
                                          const std::vector<std::int32_t>& block_ids,
                                          const std::string& request_id) {
  boost::json::array ids;
  ids.reserve(block_ids.size());
  for (std::int32_t id : block_ids) ids.emplace_back(id);
  // Key order of vLLM's NixlConnectorScheduler.request_finished.
  return boost::json::object{
      {"do_remote_prefill", true},
      {"do_remote_decode", false},
      {"remote_block_ids", std::move(ids)},
      {"remote_engine_id", self.engine_id},
      {"remote_request_id", request_id},
      {"remote_host", self.host},
      {"remote_port", self.port},
      {"tp_size", self.tp_size},
  };
}

}  // namespace kvroute::sim
