// `EffectiveYaml`: the configuration as kvroute will run it, every default filled in, for
// `kvroute config check`. Its own file because it mirrors every section of GatewayConfig
// (config.cc parses them); secrets (API keys, tenants, salts) are never printed.
#include <yaml-cpp/yaml.h>

#include <string>

#include "gateway/config.h"
#include "gateway/config_k8s.h"
#include "gateway/pd_config.h"

namespace kvroute::gateway {

std::string EffectiveYaml(const GatewayConfig& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "listen" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "host" << YAML::Value << c.host;
  out << YAML::Key << "port" << YAML::Value << c.port;
  out << YAML::Key << "http_threads" << YAML::Value << c.http_threads;
  out << YAML::Key << "proxy_threads" << YAML::Value << c.proxy_threads;
  out << YAML::EndMap;
  out << YAML::Key << "workers" << YAML::Value << YAML::BeginSeq;
  for (const auto& w : c.workers) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << w.name;
    out << YAML::Key << "url" << YAML::Value << w.url;
    out << YAML::Key << "models" << YAML::Value << YAML::Flow << w.models;
    out << YAML::Key << "role" << YAML::Value << w.role;
    out << YAML::Key << "profile" << YAML::Value << w.profile;
    out << YAML::Key << "profile_speedup" << YAML::Value << w.profile_speedup;
    out << YAML::Key << "cpu_load_bytes_per_s" << YAML::Value << w.cpu_load_bytes_per_s;
    EmitWorkerPd(w.pd, out);
    out << YAML::Key << "kv_events" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "endpoint" << YAML::Value << w.kv_events.endpoint;
    out << YAML::Key << "replay_endpoint" << YAML::Value << w.kv_events.replay_endpoint;
    out << YAML::Key << "topic" << YAML::Value << w.kv_events.topic;
    out << YAML::EndMap;
    out << YAML::Key << "labels" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : w.labels) out << YAML::Key << k << YAML::Value << v;
    out << YAML::EndMap;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "scheduler" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "policy" << YAML::Value << YAML::Load(c.policy_yaml);
  out << YAML::Key << "seed" << YAML::Value << c.scheduler_seed;
  out << YAML::Key << "itl_slo_s" << YAML::Value << c.itl_slo_s;
  out << YAML::EndMap;
  out << YAML::Key << "mode" << YAML::Value << std::string(RoutingModeName(c.mode));
  out << YAML::Key << "tokenizer" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "kind" << YAML::Value << c.tokenizer.kind;
  out << YAML::Key << "model_dir" << YAML::Value << c.tokenizer.model_dir;
  out << YAML::EndMap;
  out << YAML::Key << "block_size" << YAML::Value << c.block_size;
  out << YAML::Key << "predicted_ttl_s" << YAML::Value << c.predicted_ttl_s;
  out << YAML::Key << "approx_ttl_s" << YAML::Value << c.approx_ttl_s;
  out << YAML::Key << "failure_mode" << YAML::Value << std::string(FailureModeName(c.failure_mode));
  out << YAML::Key << "timeouts" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "connect_ms" << YAML::Value << c.timeouts.connect_ms;
  out << YAML::Key << "first_byte_ms" << YAML::Value << c.timeouts.first_byte_ms;
  out << YAML::Key << "idle_ms" << YAML::Value << c.timeouts.idle_ms;
  out << YAML::EndMap;
  out << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max_body_bytes" << YAML::Value << c.limits.max_body_bytes;
  out << YAML::Key << "max_attempts" << YAML::Value << c.limits.max_attempts;
  out << YAML::Key << "max_migrations" << YAML::Value << c.limits.max_migrations;
  out << YAML::EndMap;
  // Keys are secrets: print how many, never their values.
  out << YAML::Key << "api_keys" << YAML::Value << YAML::BeginSeq;
  for (std::size_t i = 0; i < c.api_keys.size(); ++i) out << "<redacted>";
  out << YAML::EndSeq;
  out << YAML::Key << "images" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << c.images.enabled;
  out << YAML::Key << "placeholder" << YAML::Value << c.images.placeholder;
  out << YAML::Key << "tokens_per_image" << YAML::Value << c.images.tokens_per_image;
  out << YAML::Key << "token_id" << YAML::Value << c.images.token_id;
  out << YAML::Key << "set_uuid" << YAML::Value << c.images.set_uuid;
  out << YAML::EndMap;
  EmitPd(c.pd, out);
  // Tenants may be API keys and salts are what isolates them: neither is printed.
  out << YAML::Key << "tenancy" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "from" << YAML::Value << c.tenancy.from;
  out << YAML::Key << "header" << YAML::Value << c.tenancy.header;
  out << YAML::Key << "salts" << YAML::Value << YAML::BeginMap;
  std::size_t n = 0;
  for (std::size_t i = 0; i < c.tenancy.salts.size(); ++i) {
    out << YAML::Key << "<redacted-" + std::to_string(++n) + ">" << YAML::Value << "<redacted>";
  }
  out << YAML::EndMap;
  out << YAML::Key << "unlisted" << YAML::Value << c.tenancy.unlisted;
  out << YAML::Key << "secret" << YAML::Value << (c.tenancy.secret.empty() ? "" : "<redacted>");
  out << YAML::EndMap;
  out << YAML::Key << "parity_probe" << YAML::Value << c.parity_probe;
  out << YAML::Key << "parity_probe_timeout_s" << YAML::Value << c.parity_probe_timeout_s;
  out << YAML::Key << "scrape_interval_s" << YAML::Value << c.scrape_interval_s;
  out << YAML::Key << "health_interval_s" << YAML::Value << c.health_interval_s;
  out << YAML::Key << "shutdown_grace_s" << YAML::Value << c.shutdown_grace_s;
  out << YAML::Key << "drain_timeout_s" << YAML::Value << c.drain_timeout_s;
  out << YAML::Key << "termination_grace_s" << YAML::Value << c.termination_grace_s;
  out << YAML::Key << "balancer_notice_s" << YAML::Value << c.balancer_notice_s;
  out << YAML::Key << "log_level" << YAML::Value << c.log_level;
  out << YAML::Key << "replicas" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "warm_from" << YAML::Value << YAML::Flow << c.replicas.warm_from;
  out << YAML::Key << "warm_timeout_s" << YAML::Value << c.replicas.warm_timeout_s;
  out << YAML::Key << "warm_keep_s" << YAML::Value << c.replicas.warm_keep_s;
  out << YAML::Key << "etcd_prefix" << YAML::Value << c.replicas.etcd_prefix;
  out << YAML::Key << "advertise_url" << YAML::Value << c.replicas.advertise_url;
  out << YAML::Key << "share_bookings" << YAML::Value << c.replicas.share_bookings;
  out << YAML::Key << "delta_flush_ms" << YAML::Value << c.replicas.delta_flush_ms;
  out << YAML::Key << "remote_booking_ttl_s" << YAML::Value << c.replicas.remote_booking_ttl_s;
  out << YAML::EndMap;
  out << YAML::Key << "discovery" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "etcd" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "endpoints" << YAML::Value << YAML::Flow << c.etcd.endpoints;
  out << YAML::Key << "prefix" << YAML::Value << c.etcd.prefix;
  out << YAML::EndMap;
  EmitKubernetesDiscovery(out, c.kubernetes);
  out << YAML::EndMap;
  out << YAML::Key << "epp" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << c.epp.enabled;
  out << YAML::Key << "address" << YAML::Value << c.epp.address;
  out << YAML::Key << "watch_objectives" << YAML::Value << c.epp.watch_objectives;
  EmitEppAdmission(out, c.epp);
  out << YAML::EndMap;
  out << YAML::Key << "debug" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "fault" << YAML::Value << c.debug_fault;
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace kvroute::gateway
