// The Kubernetes-facing parts of GatewayConfig, kept out of config.cc: `discovery.kubernetes`
// (the InferencePool watcher's settings) and the EPP's admission settings (`epp.objectives`,
// `epp.saturation`) — parsed, validated and written back for `config check`. Internal to
// gateway/config.cc. Thread safety: pure functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <expected>
#include <string>

#include "gateway/config.h"

namespace kvroute::gateway {

// `node`: the discovery.kubernetes mapping (null or absent: leave `out` as is).
std::expected<void, std::string> ParseKubernetesDiscovery(const YAML::Node& node,
                                                          KubernetesDiscoveryConfig* out);
// With a pool: api_url empty or http(s)://, models given, source pods or endpointslices (the
// latter with a service). Namespace, token, CA may be empty: in-cluster defaults at start.
std::expected<void, std::string> ValidateKubernetesDiscovery(const KubernetesDiscoveryConfig& k);
// The "kubernetes" key and its map, closed.
void EmitKubernetesDiscovery(YAML::Emitter& out, const KubernetesDiscoveryConfig& k);

// `objectives` and `saturation`: epp's nodes of those names (null or absent: defaults).
std::expected<void, std::string> ParseEppAdmission(const YAML::Node& objectives, const YAML::Node& saturation,
                                                   GatewayConfig::Epp* out);
// The "objectives" and "saturation" keys of the epp map.
void EmitEppAdmission(YAML::Emitter& out, const GatewayConfig::Epp& epp);

}  // namespace kvroute::gateway
