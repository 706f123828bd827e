#include "gateway/config.h"

#include <sched.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "client/client_types.h"
#include "gateway/config_k8s.h"
#include "gateway/config_workers.h"
#include "gateway/config_reader.h"
#include "sched/registry.h"

namespace kvroute::gateway {

int DefaultLaneCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 2;
  return std::clamp(CPU_COUNT(&set), 1, 64);
}

namespace {

using config_detail::Error;
using config_detail::Join;
using config_detail::MapReader;

std::expected<void, std::string> ParseTenancy(const YAML::Node& node, TenancyConfig* t) {
  MapReader r(node, "tenancy");
  KVROUTE_TRY(r.CheckIsMap());
  KVROUTE_TRY(r.String("from", &t->from));
  KVROUTE_TRY(r.String("header", &t->header));
  KVROUTE_TRY(r.String("unlisted", &t->unlisted));
  KVROUTE_TRY(r.String("secret", &t->secret));
  YAML::Node salts = r.Get("salts");
  if (salts && !salts.IsNull()) {
    if (!salts.IsMap()) return Error("tenancy.salts: must be a mapping of tenant to salt");
    for (const auto& kv : salts) {
      if (!kv.second.IsScalar()) return Error("tenancy.salts: every salt must be a string");
      t->salts[kv.first.Scalar()] = kv.second.Scalar();
    }
  }
  return r.RejectUnknown();
}

std::expected<void, std::string> ParseInto(const YAML::Node& root, GatewayConfig* c) {
  MapReader r(root, "");
  KVROUTE_TRY(r.CheckIsMap());
  // listen: {host, port} or top-level host/port.
  YAML::Node listen = r.Get("listen");
  if (listen && !listen.IsNull()) {
    MapReader l(listen, "listen");
    KVROUTE_TRY(l.CheckIsMap());
    KVROUTE_TRY(l.String("host", &c->host));
    KVROUTE_TRY(l.Number("port", &c->port, 0, 65535));
    KVROUTE_TRY(l.Number("http_threads", &c->http_threads, 1, 256));
    KVROUTE_TRY(l.Number("proxy_threads", &c->proxy_threads, 1, 256));
    KVROUTE_TRY(l.RejectUnknown());
  }
  YAML::Node workers = r.Get("workers");
  if (workers && !workers.IsNull()) {
    if (!workers.IsSequence()) return Error("workers: must be a list");
    for (std::size_t i = 0; i < workers.size(); ++i) {
      auto w = ParseWorker(workers[i], "workers[" + std::to_string(i) + "]");
      if (!w) return Error(w.error());
      c->workers.push_back(std::move(*w));
    }
  }
  YAML::Node store = r.Get("kv_store");
  if (store && !store.IsNull()) {
    MapReader st(store, "kv_store");
    KVROUTE_TRY(st.CheckIsMap());
    KvStoreConfig k;
    KVROUTE_TRY(st.String("host", &k.host));
    KVROUTE_TRY(st.Number("load_bytes_per_s", &k.load_bytes_per_s, 0, 1e15));
    YAML::Node ev = st.Get("kv_events");
    if (ev && !ev.IsNull()) {
      MapReader e(ev, "kv_store.kv_events");
      KVROUTE_TRY(e.CheckIsMap());
      KVROUTE_TRY(e.String("endpoint", &k.kv_events.endpoint));
      KVROUTE_TRY(e.String("replay_endpoint", &k.kv_events.replay_endpoint));
      KVROUTE_TRY(e.String("topic", &k.kv_events.topic));
      KVROUTE_TRY(e.RejectUnknown());
    }
    KVROUTE_TRY(st.RejectUnknown());
    if (k.kv_events.endpoint.empty()) return Error("kv_store.kv_events.endpoint: required");
    c->kv_store = std::move(k);
  }
  YAML::Node sched = r.Get("scheduler");
  if (sched && !sched.IsNull()) {
    MapReader s(sched, "scheduler");
    KVROUTE_TRY(s.CheckIsMap());
    YAML::Node policy = s.Get("policy");
    if (policy && !policy.IsNull()) {
      if (policy.IsScalar()) {
        c->policy_yaml = "preset: " + policy.Scalar();
      } else {
        YAML::Emitter out;
        out << policy;
        c->policy_yaml = out.c_str();
      }
    }
    KVROUTE_TRY(s.Number("seed", &c->scheduler_seed, 0, 9.0e15));
    KVROUTE_TRY(s.Number("itl_slo_s", &c->itl_slo_s, 0, 3600));
    KVROUTE_TRY(s.RejectUnknown());
  }
  std::string mode;
  KVROUTE_TRY(r.String("mode", &mode));
  if (!mode.empty()) {
    if (mode == "precise") {
      c->mode = RoutingMode::kPrecise;
    } else if (mode == "approximate") {
      c->mode = RoutingMode::kApproximate;
    } else {
      return Error("mode: '" + mode + "' is not one of precise, approximate");
    }
  }
  YAML::Node tok = r.Get("tokenizer");
  if (tok && !tok.IsNull()) {
    if (tok.IsScalar()) {
      c->tokenizer.kind = tok.Scalar();
    } else {
      MapReader t(tok, "tokenizer");
      KVROUTE_TRY(t.CheckIsMap());
      KVROUTE_TRY(t.String("kind", &c->tokenizer.kind));
      KVROUTE_TRY(t.String("model_dir", &c->tokenizer.model_dir));
      if (!c->tokenizer.model_dir.empty() && !t.Get("kind")) c->tokenizer.kind = "hf";
      KVROUTE_TRY(t.RejectUnknown());
    }
  }
  KVROUTE_TRY(r.Number("block_size", &c->block_size, 0, 4096));
  KVROUTE_TRY(r.Number("predicted_ttl_s", &c->predicted_ttl_s, 0, 3600));
  KVROUTE_TRY(r.Number("approx_ttl_s", &c->approx_ttl_s, 0, 86400));
  std::string failure;
  KVROUTE_TRY(r.String("failure_mode", &failure));
  if (!failure.empty()) {
    if (failure == "fail_open") {
      c->failure_mode = FailureMode::kFailOpen;
    } else if (failure == "fail_close") {
      c->failure_mode = FailureMode::kFailClose;
    } else {
      return Error("failure_mode: '" + failure + "' is not one of fail_open, fail_close");
    }
  }
  YAML::Node timeouts = r.Get("timeouts");
  if (timeouts && !timeouts.IsNull()) {
    MapReader t(timeouts, "timeouts");
    KVROUTE_TRY(t.CheckIsMap());
    KVROUTE_TRY(t.Number("connect_ms", &c->timeouts.connect_ms, 0, 3.6e6));
    KVROUTE_TRY(t.Number("first_byte_ms", &c->timeouts.first_byte_ms, 0, 3.6e6));
    KVROUTE_TRY(t.Number("idle_ms", &c->timeouts.idle_ms, 0, 3.6e6));
    KVROUTE_TRY(t.RejectUnknown());
  }
  YAML::Node limits = r.Get("limits");
  if (limits && !limits.IsNull()) {
    MapReader l(limits, "limits");
    KVROUTE_TRY(l.CheckIsMap());
    KVROUTE_TRY(l.Number("max_body_bytes", &c->limits.max_body_bytes, 1024, 1 << 30));
    KVROUTE_TRY(l.Number("max_attempts", &c->limits.max_attempts, 1, 16));
    KVROUTE_TRY(l.Number("max_migrations", &c->limits.max_migrations, 0, 16));
    KVROUTE_TRY(l.RejectUnknown());
  }
  KVROUTE_TRY(r.StringList("api_keys", &c->api_keys));
  YAML::Node images = r.Get("images");
  if (images && !images.IsNull()) {
    MapReader m(images, "images");
    KVROUTE_TRY(m.CheckIsMap());
    KVROUTE_TRY(m.Bool("enabled", &c->images.enabled));
    KVROUTE_TRY(m.String("placeholder", &c->images.placeholder));
    KVROUTE_TRY(m.Number("tokens_per_image", &c->images.tokens_per_image, 0, 1 << 20));
    KVROUTE_TRY(m.Number("token_id", &c->images.token_id, -1, 4294967295.0));
    KVROUTE_TRY(m.Bool("set_uuid", &c->images.set_uuid));
    KVROUTE_TRY(m.RejectUnknown());
  }
  YAML::Node pd = r.Get("pd");
  if (pd && !pd.IsNull()) KVROUTE_TRY(ParsePdSection(pd, &c->pd));
  YAML::Node tenancy = r.Get("tenancy");
  if (tenancy && !tenancy.IsNull()) KVROUTE_TRY(ParseTenancy(tenancy, &c->tenancy));
  KVROUTE_TRY(r.Bool("parity_probe", &c->parity_probe));
  KVROUTE_TRY(r.Number("parity_probe_timeout_s", &c->parity_probe_timeout_s, 0.05, 600));
  KVROUTE_TRY(r.Number("scrape_interval_s", &c->scrape_interval_s, 0.01, 3600));
  KVROUTE_TRY(r.Number("health_interval_s", &c->health_interval_s, 0.01, 3600));
  KVROUTE_TRY(r.Number("shutdown_grace_s", &c->shutdown_grace_s, 0, 3600));
  KVROUTE_TRY(r.Number("drain_timeout_s", &c->drain_timeout_s, 0, 86400));
  KVROUTE_TRY(r.Number("termination_grace_s", &c->termination_grace_s, 0, 86400));
  KVROUTE_TRY(r.Number("balancer_notice_s", &c->balancer_notice_s, 0, 3600));
  KVROUTE_TRY(r.String("log_level", &c->log_level));
  YAML::Node replicas = r.Get("replicas");
  if (replicas && !replicas.IsNull()) {
    MapReader m(replicas, "replicas");
    KVROUTE_TRY(m.CheckIsMap());
    KVROUTE_TRY(m.StringList("warm_from", &c->replicas.warm_from));
    KVROUTE_TRY(m.Number("warm_timeout_s", &c->replicas.warm_timeout_s, 0.05, 600));
    KVROUTE_TRY(m.Number("warm_keep_s", &c->replicas.warm_keep_s, 0, 3600));
    KVROUTE_TRY(m.String("etcd_prefix", &c->replicas.etcd_prefix));
    KVROUTE_TRY(m.String("advertise_url", &c->replicas.advertise_url));
    KVROUTE_TRY(m.Bool("share_bookings", &c->replicas.share_bookings));
    KVROUTE_TRY(m.Number("delta_flush_ms", &c->replicas.delta_flush_ms, 0.1, 1000));
    KVROUTE_TRY(m.Number("remote_booking_ttl_s", &c->replicas.remote_booking_ttl_s, 1, 86400));
    KVROUTE_TRY(m.RejectUnknown());
  }
  YAML::Node discovery = r.Get("discovery");
  if (discovery && !discovery.IsNull()) {
    MapReader d(discovery, "discovery");
    KVROUTE_TRY(d.CheckIsMap());
    YAML::Node etcd = d.Get("etcd");
    if (etcd && !etcd.IsNull()) {
      MapReader e(etcd, "discovery.etcd");
      KVROUTE_TRY(e.CheckIsMap());
      KVROUTE_TRY(e.StringList("endpoints", &c->etcd.endpoints));
      KVROUTE_TRY(e.String("prefix", &c->etcd.prefix));
      KVROUTE_TRY(e.RejectUnknown());
    }
    KVROUTE_TRY(ParseKubernetesDiscovery(d.Get("kubernetes"), &c->kubernetes));
    KVROUTE_TRY(d.RejectUnknown());
  }
  YAML::Node epp = r.Get("epp");
  if (epp && !epp.IsNull()) {
    MapReader e(epp, "epp");
    KVROUTE_TRY(e.CheckIsMap());
    KVROUTE_TRY(e.Bool("enabled", &c->epp.enabled));
    KVROUTE_TRY(e.String("address", &c->epp.address));
    KVROUTE_TRY(e.Bool("watch_objectives", &c->epp.watch_objectives));
    KVROUTE_TRY(ParseEppAdmission(e.Get("objectives"), e.Get("saturation"), &c->epp));
    KVROUTE_TRY(e.RejectUnknown());
  }
  YAML::Node debug = r.Get("debug");
  if (debug && !debug.IsNull()) {
    MapReader d(debug, "debug");
    KVROUTE_TRY(d.CheckIsMap());
    KVROUTE_TRY(d.String("fault", &c->debug_fault));
    KVROUTE_TRY(d.RejectUnknown());
  }
  return r.RejectUnknown();
}

}  // namespace

std::string_view RoutingModeName(RoutingMode mode) {
  return mode == RoutingMode::kPrecise ? "precise" : "approximate";
}
std::string_view FailureModeName(FailureMode mode) {
  return mode == FailureMode::kFailOpen ? "fail_open" : "fail_close";
}

std::expected<GatewayConfig, std::string> ParseConfig(std::string_view yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Error("invalid YAML: " + std::string(e.what()));
  }
  GatewayConfig config;
  try {
    KVROUTE_TRY(ParseInto(root, &config));
  } catch (const YAML::Exception& e) {
    return Error("invalid configuration: " + std::string(e.what()));
  }
  return config;
}

std::expected<GatewayConfig, std::string> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto config = ParseConfig(ss.str());
  if (!config) return Error(path + ": " + config.error());
  return config;
}

std::expected<void, std::string> Validate(const GatewayConfig& c) {
  if (c.port < 0 || c.port > 65535) return Error("listen.port: out of range [0, 65535]");
  if (c.epp.enabled && c.epp.address.rfind(':') == std::string::npos) {
    return Error("epp.address: must be host:port");
  }
  if (c.http_threads < 1) return Error("listen.http_threads: must be >= 1");
  if (c.proxy_threads < 1) return Error("listen.proxy_threads: must be >= 1");
  KVROUTE_TRY(ValidateKubernetesDiscovery(c.kubernetes));
  if (c.workers.empty() && c.etcd.endpoints.empty() && c.kubernetes.pool.empty()) {
    return Error(
        "workers: at least one worker is required (or discovery.etcd, discovery.kubernetes)");
  }
  for (const auto& e : c.etcd.endpoints) {
    auto url = client::ParseUrl(e.find("://") == std::string::npos ? "http://" + e : e);
    if (!url || url->target != "/") {
      return Error("discovery.etcd.endpoints: '" + e + "' is not http://host:port");
    }
  }
  if (!c.etcd.endpoints.empty() && c.etcd.prefix.empty()) {
    return Error("discovery.etcd.prefix: must not be empty");
  }
  for (const auto& u : c.replicas.warm_from) {
    auto url = client::ParseUrl(u);
    if (!url || url->target != "/") {
      return Error("replicas.warm_from: '" + u + "' is not http://host:port");
    }
  }
  if (!c.replicas.etcd_prefix.empty() && c.etcd.endpoints.empty()) {
    return Error("replicas.etcd_prefix: needs discovery.etcd.endpoints (or --etcd)");
  }
  if (!c.replicas.advertise_url.empty()) {
    auto url = client::ParseUrl(c.replicas.advertise_url);
    if (!url || url->target != "/") {
      return Error("replicas.advertise_url: '" + c.replicas.advertise_url +
                   "' is not http://host:port");
    }
  }
  if (!c.replicas.etcd_prefix.empty() && c.replicas.advertise_url.empty() &&
      (c.host == "0.0.0.0" || c.host == "::")) {
    return Error("replicas.advertise_url: required with replicas.etcd_prefix when listen.host "
                 "is a wildcard (siblings need an address to reach this replica)");
  }
  KVROUTE_TRY(ValidateWorkers(c.workers));
  if (c.tokenizer.kind != "simple" && c.tokenizer.kind != "hf") {
    return Error("tokenizer.kind: '" + c.tokenizer.kind + "' is not one of simple, hf");
  }
  if (c.tokenizer.kind == "hf" && c.tokenizer.model_dir.empty()) {
    return Error("tokenizer.model_dir: required when tokenizer.kind is hf");
  }
  if (c.images.placeholder.empty()) return Error("images.placeholder: must not be empty");
  const TenancyConfig& t = c.tenancy;
  if (t.from != "none" && t.from != "api_key" && t.from != "header") {
    return Error("tenancy.from: '" + t.from + "' is not one of none, api_key, header");
  }
  if (t.from == "header" && t.header.empty()) {
    return Error("tenancy.header: required when tenancy.from is header");
  }
  if (t.unlisted != "derive" && t.unlisted != "none") {
    return Error("tenancy.unlisted: '" + t.unlisted + "' is not one of derive, none");
  }
  for (const auto& [tenant, salt] : t.salts) {
    if (tenant.empty() || salt.empty()) return Error("tenancy.salts: empty tenant or salt");
  }
  KVROUTE_TRY(ValidatePd(c.pd));
  if (!c.debug_fault.empty() && c.debug_fault != "schedule_error") {
    return Error("debug.fault: '" + c.debug_fault + "' is not one of schedule_error");
  }
  static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error", "off"};
  if (!kLevels.contains(c.log_level)) return Error("log_level: unknown '" + c.log_level + "'");
  auto policy = sched::Registry::Builtin().ParsePolicy(c.policy_yaml);
  if (!policy) return Error("scheduler.policy." + policy.error().message);
  return {};
}

void ApplyOverrides(const ConfigOverrides& o, GatewayConfig* c) {
  if (o.host) c->host = *o.host;
  if (o.port) c->port = *o.port;
  if (o.policy) {
    const bool is_yaml = o.policy->find(':') != std::string::npos;
    c->policy_yaml = is_yaml ? *o.policy : "preset: " + *o.policy;
  }
  if (o.log_level) c->log_level = *o.log_level;
  if (o.drain_timeout_s) c->drain_timeout_s = *o.drain_timeout_s;
  if (o.etcd) {
    c->etcd.endpoints.clear();
    std::string_view rest = *o.etcd;
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      std::string one(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (!one.empty()) c->etcd.endpoints.push_back(std::move(one));
    }
  }
  if (o.etcd_prefix) c->etcd.prefix = *o.etcd_prefix;
  if (o.inference_pool) c->kubernetes.pool = *o.inference_pool;
  if (o.epp_address) {
    c->epp.enabled = true;
    if (!o.epp_address->empty()) c->epp.address = *o.epp_address;
  }
}

std::expected<GatewayConfig, std::string> LoadConfig(const std::string& path,
                                                     const ConfigOverrides& overrides) {
  auto config = LoadConfigFile(path);
  if (!config) return config;
  ApplyOverrides(overrides, &*config);
  if (auto ok = Validate(*config); !ok) return Error(path + ": " + ok.error());
  return config;
}

}  // namespace kvroute::gateway
