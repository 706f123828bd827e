// workers[]: one worker's YAML (ParseWorker) and the list's rules (ValidateWorkers), apart
// from config.cc. See config_workers.h.
#include "gateway/config_workers.h"

#include <set>

#include "client/client_types.h"
#include "gateway/config_reader.h"

namespace kvroute::gateway {

using config_detail::Error;
using config_detail::MapReader;

std::expected<WorkerConfig, std::string> ParseWorker(const YAML::Node& node, std::string path) {
  MapReader r(node, path);
  if (!node.IsMap()) return Error(path + ": must be a mapping");
  WorkerConfig w;
  KVROUTE_TRY(r.String("name", &w.name));
  KVROUTE_TRY(r.String("url", &w.url));
  KVROUTE_TRY(r.StringList("models", &w.models));
  std::string model;
  KVROUTE_TRY(r.String("model", &model));
  if (!model.empty()) w.models.insert(w.models.begin(), model);
  KVROUTE_TRY(r.String("role", &w.role));
  KVROUTE_TRY(r.String("profile", &w.profile));
  KVROUTE_TRY(r.Number("profile_speedup", &w.profile_speedup, 1e-6, 1e6));
  KVROUTE_TRY(r.Number("cpu_load_bytes_per_s", &w.cpu_load_bytes_per_s, 0, 1e15));
  KVROUTE_TRY(ParseWorkerPd(r, &w.pd));
  YAML::Node ev = r.Get("kv_events");
  if (ev && !ev.IsNull()) {
    MapReader e(ev, path + ".kv_events");
    KVROUTE_TRY(e.CheckIsMap());
    KVROUTE_TRY(e.String("endpoint", &w.kv_events.endpoint));
    KVROUTE_TRY(e.String("replay_endpoint", &w.kv_events.replay_endpoint));
    KVROUTE_TRY(e.String("topic", &w.kv_events.topic));
    KVROUTE_TRY(e.RejectUnknown());
  }
  YAML::Node labels = r.Get("labels");
  if (labels && !labels.IsNull()) {
    if (!labels.IsMap()) return Error(path + ".labels: must be a mapping of strings");
    for (const auto& kv : labels) {
      if (!kv.second.IsScalar()) {
        return Error(path + ".labels." + kv.first.Scalar() + ": must be a string");
      }
      w.labels[kv.first.Scalar()] = kv.second.Scalar();
    }
  }
  KVROUTE_TRY(r.RejectUnknown());
  if (w.name.empty()) w.name = w.url;
  return w;
}

std::expected<void, std::string> ValidateWorkers(const std::vector<WorkerConfig>& workers) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const WorkerConfig& w = workers[i];
    std::string path = "workers[" + std::to_string(i) + "]";
    auto url = client::ParseUrl(w.url);
    if (!url) return Error(path + ".url: " + url.error());
    if (!names.insert(w.name).second) return Error(path + ".name: duplicate '" + w.name + "'");
    if (w.models.empty()) return Error(path + ".models: at least one model is required");
    for (const auto& m : w.models) {
      if (m.empty()) return Error(path + ".models: empty model name");
    }
    if (w.role != "mixed" && w.role != "prefill" && w.role != "decode") {
      return Error(path + ".role: '" + w.role + "' is not one of mixed, prefill, decode");
    }
    KVROUTE_TRY(ValidateWorkerPd(w.pd, path));
  }
  return {};
}

}  // namespace kvroute::gateway
