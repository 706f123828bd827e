#include "k8s/slice_discovery.h"

#include <algorithm>

#include "k8s/json_read.h"
#include "k8s/watch_line.h"

namespace kvroute::k8s {

using namespace json_read;

SliceReconciler::SliceReconciler(PoolSpec pool, std::string service, std::vector<std::string> models,
                                 MembershipSink* sink, PodKvEventsLookup pod_kv_events)
    : pool_(std::move(pool)),
      service_(std::move(service)),
      models_(std::move(models)),
      sink_(sink),
      pod_kv_events_(std::move(pod_kv_events)) {}

std::vector<std::string> SliceReconciler::Members() const {
  std::vector<std::string> out;
  for (const auto& [name, m] : members_) out.push_back(name);
  return out;  // a std::map's keys: sorted
}

std::optional<SliceReconciler::SliceEndpoints> SliceReconciler::ReadSlice(const json::object* slice) const {
  const json::object* meta = Obj(Field(slice, "metadata"));
  if (Str(Obj(Field(meta, "labels")), kServiceNameLabel) != service_) return std::nullopt;
  // Only the pool's target ports that this slice serves; a slice without ports serves all.
  std::vector<int> ports;
  const json::value* listed = Field(slice, "ports");
  if (listed && listed->is_array() && !listed->as_array().empty()) {
    for (const auto& p : listed->as_array()) {
      const json::value* n = Field(Obj(&p), "port");
      const int port = n && n->is_int64() ? static_cast<int>(n->as_int64()) : 0;
      if (std::find(pool_.target_ports.begin(), pool_.target_ports.end(), port) != pool_.target_ports.end()) {
        ports.push_back(port);
      }
    }
  } else {
    ports = pool_.target_ports;
  }
  SliceEndpoints out;
  const json::value* endpoints = Field(slice, "endpoints");
  if (!endpoints || !endpoints->is_array()) return out;  // null while the Service has none
  for (const auto& e : endpoints->as_array()) {
    const json::object* ep = Obj(&e);
    const json::value* addresses = Field(ep, "addresses");
    if (!addresses || !addresses->is_array() || addresses->as_array().empty() ||
        !addresses->as_array()[0].is_string()) {
      continue;
    }
    const std::string address(addresses->as_array()[0].as_string());
    const json::object* ref = Obj(Field(ep, "targetRef"));
    const std::string pod = Str(ref, "kind") == "Pod" ? Str(ref, "name") : "";
    const json::object* conditions = Obj(Field(ep, "conditions"));
    const bool terminating = Bool(conditions, "terminating", false);
    // "ready: nil" is unknown, which the API tells consumers to read as ready.
    const bool ready = Bool(conditions, "ready", true) && !terminating;
    const std::string host = address.find(':') != std::string::npos ? "[" + address + "]" : address;
    for (int port : ports) {
      const std::string suffix = ":" + std::to_string(port);
      out[(pod.empty() ? host : pod) + suffix] =
          Endpoint{.url = "http://" + host + suffix, .pod = pod, .ready = ready, .terminating = terminating};
    }
  }
  return out;
}

void SliceReconciler::Reconcile() {
  // The union over slices; where two slices hold the same worker (mid-move), ready wins over
  // terminating wins over neither, so a move never causes a leave.
  std::map<std::string, Endpoint> wanted;
  auto rank = [](const Endpoint& e) { return e.ready ? 2 : e.terminating ? 1 : 0; };
  for (const auto& [slice, endpoints] : slices_) {
    for (const auto& [name, e] : endpoints) {
      auto [it, inserted] = wanted.emplace(name, e);
      if (!inserted && rank(e) > rank(it->second)) it->second = e;
    }
  }
  for (const auto& [name, e] : wanted) {
    auto m = members_.find(name);
    if (e.terminating) {
      if (m != members_.end() && !m->second.draining) {
        m->second.draining = true;
        sink_->DrainWorker(name);
      }
      continue;
    }
    if (!e.ready) {
      if (m != members_.end()) {
        members_.erase(m);
        sink_->LeaveWorker(name);
      }
      continue;
    }
    if (m != members_.end() && (m->second.draining || m->second.url == e.url)) continue;
    if (m != members_.end()) {  // a new address: a new worker
      members_.erase(m);
      sink_->LeaveWorker(name);
    }
    fleet::WorkerSpec spec;
    spec.name = name;
    spec.base_url = e.url;
    spec.models = models_;
    spec.labels = {{"k8s.service", service_}, {"k8s.pool", pool_.name}};
    if (!e.pod.empty()) spec.labels["k8s.pod"] = e.pod;
    // One engine per pod, as for pod discovery: with several target ports nothing says which
    // port's engine publishes where, so none gets the events.
    if (!e.pod.empty() && pod_kv_events_ && pool_.target_ports.size() == 1) {
      if (auto events = pod_kv_events_(e.pod)) spec.kv_events = std::move(*events);
    }
    if (sink_->JoinWorker(std::move(spec)).has_value()) members_[name] = Member{.url = e.url};
  }
  std::vector<std::string> gone;
  for (const auto& [name, m] : members_) {
    if (!wanted.contains(name)) gone.push_back(name);
  }
  for (const auto& name : gone) {
    members_.erase(name);
    sink_->LeaveWorker(name);
  }
}

std::expected<std::string, std::string> SliceReconciler::ApplyList(std::string_view body) {
  auto v = Parse(body);
  if (!v) return std::unexpected("endpointslice list: " + v.error());
  const json::object* root = Obj(&*v);
  const json::value* items = Field(root, "items");
  if (Str(root, "kind") != "EndpointSliceList" || !items || !items->is_array()) {
    return std::unexpected("endpointslice list: not an EndpointSliceList");
  }
  slices_.clear();
  for (const auto& item : items->as_array()) {
    const std::string name = Str(Obj(Field(Obj(&item), "metadata")), "name");
    if (name.empty()) continue;
    if (auto endpoints = ReadSlice(Obj(&item))) slices_[name] = std::move(*endpoints);
  }
  Reconcile();
  resource_version_ = Str(Obj(Field(root, "metadata")), "resourceVersion");
  return resource_version_;
}

SliceReconciler::Event SliceReconciler::ApplyEvent(std::string_view text) {
  WatchLine line = ReadWatchLine(text);
  if (line.event == Event::kBookmark && !line.resource_version.empty()) resource_version_ = line.resource_version;
  if (line.event != Event::kApplied) return line.event;
  const json::object* slice = line.object();
  const std::string name = Str(Obj(Field(slice, "metadata")), "name");
  auto endpoints = line.type == "DELETED" ? std::nullopt : ReadSlice(slice);
  if (endpoints) {
    slices_[name] = std::move(*endpoints);
  } else {
    slices_.erase(name);  // deleted, or relabelled away from the Service
  }
  Reconcile();
  if (!line.resource_version.empty()) resource_version_ = line.resource_version;
  return Event::kApplied;
}

}  // namespace kvroute::k8s
