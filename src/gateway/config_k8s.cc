#include "gateway/config_k8s.h"

#include "gateway/config_reader.h"

namespace kvroute::gateway {

using config_detail::Error;
using config_detail::MapReader;

std::expected<void, std::string> ParseKubernetesDiscovery(const YAML::Node& node,
                                                          KubernetesDiscoveryConfig* out) {
  if (!node || node.IsNull()) return {};
  MapReader k(node, "discovery.kubernetes");
  KVROUTE_TRY(k.CheckIsMap());
  KVROUTE_TRY(k.String("pool", &out->pool));
  KVROUTE_TRY(k.String("namespace", &out->namespace_name));
  KVROUTE_TRY(k.String("api_url", &out->api_url));
  KVROUTE_TRY(k.String("token_file", &out->token_file));
  KVROUTE_TRY(k.String("ca_file", &out->ca_file));
  KVROUTE_TRY(k.StringList("models", &out->models));
  KVROUTE_TRY(k.String("source", &out->source));
  KVROUTE_TRY(k.String("service", &out->service));
  return k.RejectUnknown();
}

std::expected<void, std::string> ValidateKubernetesDiscovery(const KubernetesDiscoveryConfig& k) {
  if (k.pool.empty()) return {};
  if (!k.api_url.empty() && !k.api_url.starts_with("http://") && !k.api_url.starts_with("https://")) {
    return Error("discovery.kubernetes.api_url: '" + k.api_url +
                 "' is not http(s)://host:port (leave it empty in a pod: the in-cluster address)");
  }
  if (k.models.empty()) return Error("discovery.kubernetes.models: at least one model name");
  if (k.source != "pods" && k.source != "endpointslices") {
    return Error("discovery.kubernetes.source: '" + k.source + "' is not one of pods, endpointslices");
  }
  if (k.source == "endpointslices" && k.service.empty()) {
    return Error("discovery.kubernetes.service: required when source is endpointslices");
  }
  return {};
}

void EmitKubernetesDiscovery(YAML::Emitter& out, const KubernetesDiscoveryConfig& k) {
  out << YAML::Key << "kubernetes" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "pool" << YAML::Value << k.pool;
  out << YAML::Key << "namespace" << YAML::Value << k.namespace_name;
  out << YAML::Key << "api_url" << YAML::Value << k.api_url;
  out << YAML::Key << "token_file" << YAML::Value << k.token_file;
  out << YAML::Key << "ca_file" << YAML::Value << k.ca_file;
  out << YAML::Key << "models" << YAML::Value << YAML::Flow << k.models;
  out << YAML::Key << "source" << YAML::Value << k.source;
  out << YAML::Key << "service" << YAML::Value << k.service;
  out << YAML::EndMap;
}

std::expected<void, std::string> ParseEppAdmission(const YAML::Node& objectives, const YAML::Node& saturation,
                                                   GatewayConfig::Epp* out) {
  if (objectives && !objectives.IsNull()) {
    if (!objectives.IsMap()) return Error("epp.objectives: must be a mapping of objective name to priority");
    for (const auto& kv : objectives) {
      int priority = 0;
      if (!kv.second.IsScalar() || !YAML::convert<int>::decode(kv.second, priority)) {
        return Error("epp.objectives." + kv.first.Scalar() + ": must be an integer priority");
      }
      out->objectives[kv.first.Scalar()] = priority;
    }
  }
  if (saturation && !saturation.IsNull()) {
    MapReader sat(saturation, "epp.saturation");
    KVROUTE_TRY(sat.CheckIsMap());
    KVROUTE_TRY(sat.Number("queue_depth", &out->saturation_queue_depth, 0, 1e6));
    KVROUTE_TRY(sat.Number("kv_usage", &out->saturation_kv_usage, 0, 1));
    KVROUTE_TRY(sat.Number("metrics_max_age_s", &out->saturation_metrics_max_age_s, 0, 3600));
    KVROUTE_TRY(sat.RejectUnknown());
  }
  return {};
}

void EmitEppAdmission(YAML::Emitter& out, const GatewayConfig::Epp& epp) {
  out << YAML::Key << "objectives" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, priority] : epp.objectives) out << YAML::Key << name << YAML::Value << priority;
  out << YAML::EndMap;
  out << YAML::Key << "saturation" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "queue_depth" << YAML::Value << epp.saturation_queue_depth;
  out << YAML::Key << "kv_usage" << YAML::Value << epp.saturation_kv_usage;
  out << YAML::Key << "metrics_max_age_s" << YAML::Value << epp.saturation_metrics_max_age_s;
  out << YAML::EndMap;
}

}  // namespace kvroute::gateway
