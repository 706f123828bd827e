#include "k8s/pod_kv_events.h"

#include <charconv>
#include <string>
#include <string_view>

#include "k8s/json_read.h"

namespace kvroute::k8s {
namespace {

using namespace json_read;

std::optional<int> Port(const std::string& text) {
  int port = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || p != text.data() + text.size() || port < 1 || port > 65535) return std::nullopt;
  return port;
}

bool Binds(std::string_view endpoint) {
  return endpoint.find('*') != std::string_view::npos || endpoint.find("::") != std::string_view::npos;
}

std::optional<fleet::KvEventSource> FromAnnotations(const json::object* annotations) {
  auto port = Port(Str(annotations, kKvEventsPortAnnotation));
  if (!port) return std::nullopt;
  fleet::KvEventSource out;
  out.endpoint = "tcp://*:" + std::to_string(*port);
  if (auto replay = Port(Str(annotations, kKvEventsReplayPortAnnotation))) {
    out.replay_endpoint = "tcp://*:" + std::to_string(*replay);
  }
  out.topic = Str(annotations, kKvEventsTopicAnnotation);
  return out;
}

// The JSON after --kv-events-config (or --kv_events_config) in one container's argv.
std::optional<std::string> KvEventsConfigText(const json::object* container) {
  std::vector<std::string> argv;
  for (const char* key : {"command", "args"}) {
    const json::value* list = Field(container, key);
    if (!list || !list->is_array()) continue;
    for (const auto& a : list->as_array()) {
      if (a.is_string()) argv.emplace_back(a.as_string());
    }
  }
  for (std::size_t i = 0; i < argv.size(); ++i) {
    for (std::string_view flag : {"--kv-events-config", "--kv_events_config"}) {
      const std::string& a = argv[i];
      if (a == flag && i + 1 < argv.size()) return argv[i + 1];
      if (a.size() > flag.size() && a.starts_with(flag) && a[flag.size()] == '=') return a.substr(flag.size() + 1);
    }
  }
  return std::nullopt;
}

std::optional<fleet::KvEventSource> FromVllmArgs(const json::object* container) {
  auto text = KvEventsConfigText(container);
  if (!text) return std::nullopt;
  auto v = Parse(*text);
  if (!v) return std::nullopt;
  const json::object* config = Obj(&*v);
  if (!Bool(config, "enable_kv_cache_events", false) || Str(config, "publisher") == "null") return std::nullopt;
  fleet::KvEventSource out;
  out.endpoint = Str(config, "endpoint");
  if (out.endpoint.empty()) out.endpoint = "tcp://*:5557";  // vLLM's default
  if (!Binds(out.endpoint)) return std::nullopt;
  out.replay_endpoint = Str(config, "replay_endpoint");
  out.topic = Str(config, "topic");
  return out;
}

}  // namespace

std::optional<fleet::KvEventSource> PodKvEvents(const json::object* pod) {
  if (auto a = FromAnnotations(Obj(Field(Obj(Field(pod, "metadata")), "annotations")))) return a;
  const json::value* containers = Field(Obj(Field(pod, "spec")), "containers");
  if (!containers || !containers->is_array()) return std::nullopt;
  for (const auto& c : containers->as_array()) {
    if (auto events = FromVllmArgs(Obj(&c))) return events;
  }
  return std::nullopt;
}

}  // namespace kvroute::k8s
