#include "k8s/pool_discovery.h"

#include <algorithm>

#include "k8s/json_read.h"
#include "k8s/pod_kv_events.h"
#include "k8s/watch_line.h"

namespace kvroute::k8s {

using namespace json_read;

// What one pod object says, for the membership rules.
struct PoolReconciler::PodView {
  std::string name;
  std::string ip;
  bool ready = false;
  bool terminating = false;
  bool labels_match = true;
  std::optional<fleet::KvEventSource> kv_events;  // pod_kv_events.h
  std::expected<PodPd, std::string> pd;           // pod_pd.h
};

std::expected<PoolSpec, std::string> ParseInferencePool(std::string_view text) {
  auto v = Parse(text);
  if (!v) return std::unexpected("InferencePool: " + v.error());
  const json::object* root = Obj(&*v);
  if (Str(root, "kind") != "InferencePool") return std::unexpected("InferencePool: kind is '" + Str(root, "kind") + "'");
  PoolSpec out;
  const json::object* meta = Obj(Field(root, "metadata"));
  out.name = Str(meta, "name");
  out.namespace_name = Str(meta, "namespace");
  const json::object* spec = Obj(Field(root, "spec"));
  if (!spec) return std::unexpected("InferencePool " + out.name + ": no spec");
  const json::object* selector = Obj(Field(spec, "selector"));
  // v1: selector.matchLabels; v1alpha2 wrote the labels directly under selector.
  const json::object* labels = Obj(Field(selector, "matchLabels"));
  if (!labels) labels = selector;
  if (labels) {
    for (const auto& [k, val] : *labels) {
      if (val.is_string()) out.selector[std::string(k)] = std::string(val.as_string());
    }
  }
  if (out.selector.empty()) return std::unexpected("InferencePool " + out.name + ": spec.selector.matchLabels is empty");
  if (const json::value* ports = Field(spec, "targetPorts"); ports && ports->is_array()) {
    for (const auto& p : ports->as_array()) {
      const json::value* n = Field(Obj(&p), "number");
      if (n && n->is_int64()) out.target_ports.push_back(static_cast<int>(n->as_int64()));
    }
  } else if (const json::value* port = Field(spec, "targetPortNumber"); port && port->is_int64()) {
    out.target_ports.push_back(static_cast<int>(port->as_int64()));  // v1alpha2
  }
  if (out.target_ports.empty() || out.target_ports.size() > 8) {
    return std::unexpected("InferencePool " + out.name + ": spec.targetPorts must hold 1 to 8 ports");
  }
  if (auto p = Str(spec, "appProtocol"); !p.empty()) out.app_protocol = p;
  const json::object* ref = Obj(Field(spec, "endpointPickerRef"));
  if (!ref) ref = Obj(Field(spec, "extensionRef"));  // v1alpha2's name
  if (ref) {
    if (auto m = Str(ref, "failureMode"); !m.empty()) out.failure_mode = m;
    out.picker_service = Str(ref, "name");
    const json::value* n = Field(Obj(Field(ref, "port")), "number");
    if (n && n->is_int64()) out.picker_port = static_cast<int>(n->as_int64());
  }
  return out;
}

std::string LabelSelector(const std::map<std::string, std::string>& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    if (!out.empty()) out += ',';
    out += k + "=" + v;
  }
  return out;
}

PoolReconciler::PoolReconciler(PoolSpec pool, std::vector<std::string> models, MembershipSink* sink)
    : pool_(std::move(pool)), models_(std::move(models)), sink_(sink) {}

std::vector<std::string> PoolReconciler::Members() const {
  std::vector<std::string> out;
  for (const auto& [pod, s] : pods_) {
    for (int port : pool_.target_ports) out.push_back(pod + ":" + std::to_string(port));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void PoolReconciler::Leave(const std::string& pod) {
  if (pods_.erase(pod) == 0) return;
  for (int port : pool_.target_ports) sink_->LeaveWorker(pod + ":" + std::to_string(port));
}

void PoolReconciler::Apply(const PodView& pod) {
  auto it = pods_.find(pod.name);
  if (!pod.labels_match) return Leave(pod.name);
  if (pod.terminating) {
    // Out of routing at once; in-flight requests finish while the pod drains.
    if (it != pods_.end() && !it->second.draining) {
      it->second.draining = true;
      for (int port : pool_.target_ports) sink_->DrainWorker(pod.name + ":" + std::to_string(port));
    }
    return;
  }
  if (!pod.ready || pod.ip.empty()) return Leave(pod.name);
  if (!pod.pd) {
    if (it != pods_.end()) Leave(pod.name);
    for (int port : pool_.target_ports) {
      sink_->Rejected(pod.name + ":" + std::to_string(port), pod.pd.error());
    }
    return;
  }
  if (it != pods_.end() && it->second.ip == pod.ip && it->second.pd == *pod.pd) return;
  if (it != pods_.end()) Leave(pod.name);  // a new IP or new P/D fields: a new worker
  bool joined = false;
  for (int port : pool_.target_ports) {
    fleet::WorkerSpec spec;
    spec.name = pod.name + ":" + std::to_string(port);
    spec.base_url = "http://" + pod.ip + ":" + std::to_string(port);
    spec.models = models_;
    spec.labels = {{"k8s.pod", pod.name}, {"k8s.pool", pool_.name}};
    // One engine per pod: its events belong to the pod's one worker. With several target
    // ports nothing says which port's engine publishes where, so none gets them.
    if (pod.kv_events && pool_.target_ports.size() == 1) spec.kv_events = *pod.kv_events;
    pod.pd->ApplyTo(&spec);
    joined = sink_->JoinWorker(std::move(spec)).has_value() || joined;
  }
  if (joined) pods_[pod.name] = PodState{.ip = pod.ip, .pd = *pod.pd};
}

namespace {

void ReadPod(const json::object* pod, const std::map<std::string, std::string>& selector,
             std::string* name, std::string* ip, bool* ready, bool* terminating, bool* match) {
  const json::object* meta = Obj(Field(pod, "metadata"));
  *name = Str(meta, "name");
  *terminating = Field(meta, "deletionTimestamp") != nullptr && !Field(meta, "deletionTimestamp")->is_null();
  const json::object* labels = Obj(Field(meta, "labels"));
  *match = true;
  for (const auto& [k, v] : selector) {
    if (Str(labels, k) != v) *match = false;
  }
  const json::object* status = Obj(Field(pod, "status"));
  *ip = Str(status, "podIP");
  *ready = false;
  if (const json::value* conds = Field(status, "conditions"); conds && conds->is_array()) {
    for (const auto& c : conds->as_array()) {
      if (Str(Obj(&c), "type") == "Ready") *ready = Str(Obj(&c), "status") == "True";
    }
  }
}

}  // namespace

std::expected<std::string, std::string> PoolReconciler::ApplyList(std::string_view body) {
  auto v = Parse(body);
  if (!v) return std::unexpected("pod list: " + v.error());
  const json::object* root = Obj(&*v);
  const json::value* items = Field(root, "items");
  if (Str(root, "kind") != "PodList" || !items || !items->is_array()) {
    return std::unexpected("pod list: not a PodList");
  }
  std::map<std::string, bool> seen;
  for (const auto& item : items->as_array()) {
    PodView pod;
    ReadPod(Obj(&item), pool_.selector, &pod.name, &pod.ip, &pod.ready, &pod.terminating, &pod.labels_match);
    pod.kv_events = PodKvEvents(Obj(&item));
    pod.pd = ReadPodPd(Obj(&item));
    if (pod.name.empty()) continue;
    seen[pod.name] = true;
    Apply(pod);
  }
  std::vector<std::string> gone;
  for (const auto& [pod, s] : pods_) {
    if (!seen.count(pod)) gone.push_back(pod);
  }
  for (const auto& pod : gone) Leave(pod);
  resource_version_ = Str(Obj(Field(root, "metadata")), "resourceVersion");
  return resource_version_;
}

PoolReconciler::Event PoolReconciler::ApplyEvent(std::string_view text) {
  WatchLine line = ReadWatchLine(text);
  if (line.event == Event::kBookmark && !line.resource_version.empty()) resource_version_ = line.resource_version;
  if (line.event != Event::kApplied) return line.event;
  PodView pod;
  ReadPod(line.object(), pool_.selector, &pod.name, &pod.ip, &pod.ready, &pod.terminating, &pod.labels_match);
  pod.kv_events = PodKvEvents(line.object());
  pod.pd = ReadPodPd(line.object());
  if (line.type == "DELETED") {
    Leave(pod.name);
  } else {
    Apply(pod);
  }
  if (!line.resource_version.empty()) resource_version_ = line.resource_version;
  return Event::kApplied;
}

}  // namespace kvroute::k8s
