#include "sim/kv_transfer_config.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cstdlib>

namespace kvroute::sim {
namespace {

std::expected<boost::json::object, std::string> ParseObject(std::string_view json,
                                                            std::string_view flag) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(json, ec);
  if (ec) return std::unexpected(std::string(flag) + ": not valid JSON (" + ec.message() + ")");
  if (!v.is_object()) return std::unexpected(std::string(flag) + ": must be a JSON object");
  return std::move(v.as_object());
}

// A string field, if present and not null; an error names flag.key.
std::expected<std::optional<std::string>, std::string> StringField(const boost::json::object& o,
                                                                   std::string_view key,
                                                                   std::string_view flag) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string()) {
    return std::unexpected(std::string(flag) + ": '" + std::string(key) + "' must be a string");
  }
  return std::string(v->get_string());
}

}  // namespace

std::string_view KvRoleName(KvRole role) {
  switch (role) {
    case KvRole::kBoth:
      return "kv_both";
    case KvRole::kProducer:
      return "kv_producer";
    case KvRole::kConsumer:
      return "kv_consumer";
  }
  return "kv_both";
}

std::expected<KvTransferConfig, std::string> ParseKvTransferConfig(std::string_view json) {
  constexpr std::string_view kFlag = "--kv-transfer-config";
  auto obj = ParseObject(json, kFlag);
  if (!obj) return std::unexpected(obj.error());
  KvTransferConfig c;
  auto connector = StringField(*obj, "kv_connector", kFlag);
  if (!connector) return std::unexpected(connector.error());
  if (!*connector) return std::unexpected(std::string(kFlag) + ": 'kv_connector' is required");
  if (**connector != "NixlConnector") {
    return std::unexpected(std::string(kFlag) + ": kv_connector '" + **connector +
                           "' is not simulated (only NixlConnector)");
  }
  c.connector = **connector;
  auto role = StringField(*obj, "kv_role", kFlag);
  if (!role) return std::unexpected(role.error());
  // vLLM requires kv_role once a connector is set.
  if (!*role) return std::unexpected(std::string(kFlag) + ": 'kv_role' is required");
  if (**role == "kv_both") {
    c.role = KvRole::kBoth;
  } else if (**role == "kv_producer") {
    c.role = KvRole::kProducer;
  } else if (**role == "kv_consumer") {
    c.role = KvRole::kConsumer;
  } else {
    return std::unexpected(std::string(kFlag) + ": kv_role must be kv_both, kv_producer or "
                                                "kv_consumer, got '" + **role + "'");
  }
  auto engine_id = StringField(*obj, "engine_id", kFlag);
  if (!engine_id) return std::unexpected(engine_id.error());
  if (*engine_id) c.engine_id = **engine_id;
  return c;
}

std::expected<KvEventsSettings, std::string> ParseKvEventsConfig(std::string_view json,
                                                                 KvEventsSettings out) {
  constexpr std::string_view kFlag = "--kv-events-config";
  auto obj = ParseObject(json, kFlag);
  if (!obj) return std::unexpected(obj.error());
  // vLLM: events are off unless enable_kv_cache_events is true.
  out.enabled = false;
  if (const boost::json::value* v = obj->if_contains("enable_kv_cache_events")) {
    if (!v->is_bool()) {
      return std::unexpected(std::string(kFlag) + ": 'enable_kv_cache_events' must be a boolean");
    }
    out.enabled = v->get_bool();
  }
  auto publisher = StringField(*obj, "publisher", kFlag);
  if (!publisher) return std::unexpected(publisher.error());
  if (*publisher && **publisher == "null") out.enabled = false;
  if (*publisher && **publisher != "null" && **publisher != "zmq") {
    return std::unexpected(std::string(kFlag) + ": publisher must be 'zmq' or 'null'");
  }
  for (auto [key, field] : {std::pair<std::string_view, std::string*>{"endpoint", &out.endpoint},
                            {"replay_endpoint", &out.replay_endpoint},
                            {"topic", &out.topic}}) {
    auto s = StringField(*obj, key, kFlag);
    if (!s) return std::unexpected(s.error());
    if (*s) *field = **s;
  }
  if (const boost::json::value* v = obj->if_contains("buffer_steps"); v && !v->is_null()) {
    if (!v->is_int64() || v->get_int64() < 1) {
      return std::unexpected(std::string(kFlag) + ": 'buffer_steps' must be a positive integer");
    }
    out.buffer_steps = static_cast<std::uint64_t>(v->get_int64());
  }
  return out;
}

NixlEnvDefaults ReadNixlEnv() {
  NixlEnvDefaults d;
  if (const char* host = std::getenv("VLLM_NIXL_SIDE_CHANNEL_HOST"); host && *host) {
    d.side_channel_host = host;
  }
  if (const char* port = std::getenv("VLLM_NIXL_SIDE_CHANNEL_PORT"); port && *port) {
    d.side_channel_port = std::atoi(port);
  }
  if (const char* t = std::getenv("VLLM_NIXL_ABORT_REQUEST_TIMEOUT"); t && *t) {
    d.abort_request_timeout_s = std::atof(t);
  }
  return d;
}

}  // namespace kvroute::sim
