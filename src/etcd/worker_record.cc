#include "etcd/worker_record.h"

#include <boost/json.hpp>
#include <cmath>

namespace kvroute::etcd {
namespace json = boost::json;
namespace {

std::expected<void, std::string> String(const json::object& o, std::string_view name,
                                        std::string* out, bool required = false) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr) {
    if (required) return std::unexpected(std::string(name) + ": required");
    return {};
  }
  if (!v->is_string()) return std::unexpected(std::string(name) + ": must be a string");
  *out = v->as_string();
  if (required && out->empty()) return std::unexpected(std::string(name) + ": must not be empty");
  return {};
}

std::expected<void, std::string> Count(const json::object& o, std::string_view name,
                                       std::uint32_t* out, std::uint32_t min) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr) return {};
  std::int64_t n = -1;
  if (v->is_int64()) n = v->as_int64();
  if (v->is_uint64() && v->as_uint64() <= 1u << 30) n = static_cast<std::int64_t>(v->as_uint64());
  if (n < min || n > (1 << 30)) {
    return std::unexpected(std::string(name) + ": must be an integer >= " + std::to_string(min));
  }
  *out = static_cast<std::uint32_t>(n);
  return {};
}

// An optional finite number: > 0 when `positive`, else >= 0 (both link figures).
std::expected<void, std::string> Figure(const json::object& o, std::string_view name,
                                         std::optional<double>* out, bool positive) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr || v->is_null()) return {};
  const double x = v->is_number() ? v->to_number<double>() : -1;
  if (!v->is_number() || !std::isfinite(x) || (positive ? !(x > 0) : x < 0)) {
    return std::unexpected(std::string(name) + ": must be a number " + (positive ? "> 0" : ">= 0"));
  }
  *out = x;
  return {};
}

}  // namespace

std::string ToJson(const WorkerRecord& r) {
  json::object o;
  o["name"] = r.name;
  o["url"] = r.url;
  json::array models;
  for (const auto& m : r.models) models.emplace_back(m);
  o["models"] = std::move(models);
  o["role"] = r.role;
  // Not said stays absent (0 is not a valid value to read back).
  if (r.tp != 0) o["tp"] = r.tp;
  if (r.gpus != 0) o["gpus"] = r.gpus;
  o["block_size"] = r.block_size;
  json::object ev;
  ev["endpoint"] = r.kv_events_endpoint;
  ev["replay_endpoint"] = r.kv_events_replay_endpoint;
  ev["topic"] = r.kv_events_topic;
  o["kv_events"] = std::move(ev);
  o["profile"] = r.profile;
  o["profile_speedup"] = r.profile_speedup;
  o["draining"] = r.draining;
  if (!r.link.empty()) o["link"] = r.link;
  if (r.link_bytes_per_s) o["link_bytes_per_s"] = *r.link_bytes_per_s;
  if (r.link_latency_s) o["link_latency_s"] = *r.link_latency_s;
  return json::serialize(o);
}

std::expected<WorkerRecord, std::string> ParseWorkerRecord(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return std::unexpected("not JSON: " + ec.message());
  if (!v.is_object()) return std::unexpected("not a JSON object");
  const json::object& o = v.as_object();
  WorkerRecord r;
  for (auto ok : {String(o, "name", &r.name, true), String(o, "url", &r.url, true),
                  String(o, "role", &r.role), String(o, "profile", &r.profile),
                  String(o, "link", &r.link)}) {
    if (!ok) return std::unexpected(ok.error());
  }
  if (r.role != "mixed" && r.role != "prefill" && r.role != "decode") {
    return std::unexpected("role: must be mixed, prefill or decode");
  }
  const json::value* models = o.if_contains("models");
  if (models == nullptr || !models->is_array() || models->as_array().empty()) {
    return std::unexpected("models: must be a non-empty array of strings");
  }
  for (const json::value& m : models->as_array()) {
    if (!m.is_string() || m.as_string().empty()) {
      return std::unexpected("models: must be a non-empty array of strings");
    }
    r.models.emplace_back(m.as_string());
  }
  for (auto ok : {Count(o, "tp", &r.tp, 1), Count(o, "gpus", &r.gpus, 1),
                  Count(o, "block_size", &r.block_size, 0)}) {
    if (!ok) return std::unexpected(ok.error());
  }
  if (r.tp != 0 && r.gpus != 0 && r.gpus < r.tp) {
    return std::unexpected("gpus: must be >= tp");
  }
  for (auto ok : {Figure(o, "link_bytes_per_s", &r.link_bytes_per_s, /*positive=*/true),
                  Figure(o, "link_latency_s", &r.link_latency_s, /*positive=*/false)}) {
    if (!ok) return std::unexpected(ok.error());
  }
  if (const json::value* ev = o.if_contains("kv_events"); ev != nullptr && !ev->is_null()) {
    if (!ev->is_object()) return std::unexpected("kv_events: must be an object");
    const json::object& e = ev->as_object();
    for (auto ok : {String(e, "endpoint", &r.kv_events_endpoint),
                    String(e, "replay_endpoint", &r.kv_events_replay_endpoint),
                    String(e, "topic", &r.kv_events_topic)}) {
      if (!ok) return std::unexpected("kv_events." + ok.error());
    }
  }
  if (const json::value* s = o.if_contains("profile_speedup")) {
    if (!s->is_number() || s->to_number<double>() <= 0) {
      return std::unexpected("profile_speedup: must be a number > 0");
    }
    r.profile_speedup = s->to_number<double>();
  }
  if (const json::value* d = o.if_contains("draining")) {
    if (!d->is_bool()) return std::unexpected("draining: must be true or false");
    r.draining = d->as_bool();
  }
  return r;
}

}  // namespace kvroute::etcd
