// GatewayConfig: every setting of `kvroute serve`, read from one YAML file, validated once at
// start-up (errors name the key: "workers[1].url: ..."), then overridden by flags. Defaults
// are written next to each field; `kvroute config check` prints EffectiveYaml(), the
// configuration with every default resolved, plus the policy's own effective_config().
//
// The scheduler policy is kept as YAML text (preset name or full spec) and built by
// sched::Registry at start; LoadConfig builds it once to validate it.
//
// Ownership: plain values. Thread safety: plain values; the gateway holds one const copy.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/pd_config.h"

namespace kvroute::gateway {

struct KvEventsConfig {
  std::string endpoint;         // the engine's kv_events_config.endpoint; empty: no events
  std::string replay_endpoint;  // the engine's replay ROUTER; empty: gaps not repairable
  std::string topic;            // subscription prefix; empty: every topic
};

struct WorkerConfig {
  std::string name;                 // unique; used in metrics labels and admin paths
  std::string url;                  // "http://host:port" of the model server
  std::vector<std::string> models;  // served model names; at least one
  std::string role = "mixed";       // mixed | prefill | decode
  KvEventsConfig kv_events;
  std::string profile;  // engine profile seeding learned rates; empty: the default profile
  // How many times faster than its profile the engine runs (`kvroute sim --speedup`); the
  // profile's times are divided by it when seeding rates and the CPU tier's bandwidth is
  // multiplied by it. 1 for a real engine.
  double profile_speedup = 1;
  // Bandwidth to load a KV block back from the worker's host-memory (CPU) tier, bytes/s;
  // 0: the engine model's host-to-GPU bandwidth (engine::EngineConfig, what `kvroute sim`
  // and `kvroute simulate` charge). predicted_ttft counts CPU-tier blocks as loaded at this
  // rate instead of recomputed.
  double cpu_load_bytes_per_s = 0;
  std::map<std::string, std::string> labels;
  WorkerPdConfig pd;  // tp, gpus, link (prefill/decode disaggregation; gateway/pd_config.h)
};

// The cluster's shared KV store (`kvroute store`, src/store/): its KV events are indexed once
// and credited to every worker as the SHARED tier (issue 20).
struct KvStoreConfig {
  std::string host = "127.0.0.1";  // where "tcp://*:port" endpoints are connected to
  KvEventsConfig kv_events;
  // Bandwidth a worker loads a shared block at, bytes/s; 0: the engine model's 12.5e9
  // (engine::EngineConfig::shared), multiplied by each worker's profile_speedup.
  double load_bytes_per_s = 0;
};

enum class RoutingMode { kPrecise, kApproximate };
enum class FailureMode { kFailOpen, kFailClose };
std::string_view RoutingModeName(RoutingMode mode);
std::string_view FailureModeName(FailureMode mode);

// Upstream timeouts, milliseconds (0: no limit for that wait).
struct UpstreamTimeouts {
  std::int64_t connect_ms = 2'000;       // TCP connect to a worker
  std::int64_t first_byte_ms = 300'000;  // request sent → response headers (queue + prefill)
  std::int64_t idle_ms = 60'000;         // between two body pieces (inter-token gap)
};

struct LimitsConfig {
  std::int64_t max_body_bytes = 4 << 20;  // request body; larger → 413 (OpenAI error JSON)
  int max_attempts = 3;                   // workers tried per request (first + retries)
  // Times one streamed request is resumed on another worker after its worker died
  // mid-stream (docs/configuration.md says why 1); 0: the stream ends with an error event.
  int max_migrations = 1;
};

struct TokenizerConfig {
  std::string kind = "simple";  // simple (SimpleTokenizer, what `kvroute sim` uses) | hf
  std::string model_dir;        // hf: directory with tokenizer.json + tokenizer_config.json
};

// tenancy: which tenant a request belongs to and the cache_salt kvroute adds for it, so
// tenants never share cache (gateway/tenancy.h has the rules).
struct TenancyConfig {
  std::string from = "none";  // none | api_key | header
  std::string header;         // from: header — the header naming the tenant (any case)
  std::map<std::string, std::string> salts;  // tenant -> cache_salt (non-empty)
  std::string unlisted = "derive";           // derive | none: a tenant not in `salts`
  std::string secret;  // derive: mixed into derived salts (so they cannot be guessed)
};

// images: OpenAI image_url parts of chat requests (precise mode keys them; see
// tokenize/image_tokens.h and api/chat_request.h).
struct ImagesConfig {
  bool enabled = true;                  // false: an image part is a 400 (text-only models)
  std::string placeholder = "<image>";  // the text standing for one image in chat content
  // Prompt tokens one image occupies; 0: the model's config.json (tokenizer.model_dir), else
  // 64 (what `kvroute sim --image-tokens` defaults to).
  std::uint32_t tokens_per_image = 0;
  std::int64_t token_id = -1;  // the image token; -1: config.json, else the placeholder's last
  bool set_uuid = true;        // forward each image's identifier as the part's `uuid`
};

// discovery.etcd: workers that register themselves in etcd (docs/etcd.md), followed at run
// time and combined with the static `workers` list.
struct EtcdDiscoveryConfig {
  std::vector<std::string> endpoints;          // client URLs; empty: no etcd discovery
  std::string prefix = "/kvroute/workers/";    // every key under it is a worker record
};

// discovery.kubernetes: the pods of a Gateway API InferencePool, followed through the
// Kubernetes API (src/k8s PoolWatcher; docs/kubernetes.md). In a pod, leave api_url,
// token_file, ca_file and namespace empty: they default to the in-cluster service address
// (https, verified against the service account's CA) and the service account's token and
// namespace; each one set here wins.
struct KubernetesDiscoveryConfig {
  std::string pool;            // the InferencePool's name; empty: no Kubernetes discovery
  std::string namespace_name;  // its namespace; empty: the service account's
  std::string api_url;         // http(s)://host:port; empty: https://$KUBERNETES_SERVICE_HOST:PORT
  std::string token_file;      // bearer token, re-read per request; empty: the SA's in-cluster
  std::string ca_file;         // https: PEM CA the API's certificate must chain to; empty: SA's
  std::vector<std::string> models;  // model names every pod serves (the catalog learns the rest)
  // Who the pool's workers are: "pods" (the pool's selector) or "endpointslices" (those of
  // `service`, kubernetes.io/service-name; k8s/slice_discovery.h).
  std::string source = "pods";
  std::string service;  // with source endpointslices: the Service's name
};

// CPUs in this process's affinity mask, clamped to [1, 64].
int DefaultLaneCount();

struct GatewayConfig {
  // Listener.
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: the OS picks one (printed in the ready line)
  // The server and the proxy share max(http_threads, proxy_threads) lanes (single-threaded
  // event loops). Default: one per CPU this process may run on (like nginx's
  // `worker_processes auto`): a lane never sleeps under load, so more lanes than cores only
  // take CPU share from neighbours, and fewer leave cores idle.
  int http_threads = DefaultLaneCount();
  int proxy_threads = 1;  // kept for older configs; only the larger of the two counts

  std::vector<WorkerConfig> workers;  // may be empty when discovery.etcd or .kubernetes is set
  EtcdDiscoveryConfig etcd;
  KubernetesDiscoveryConfig kubernetes;
  std::optional<KvStoreConfig> kv_store;  // the shared KV store; none: no shared tier
  // Sibling replicas (gateway/replica_warm.h): base URLs asked, in order, for their index
  // snapshot at start, before this replica subscribes or reports ready; empty: start cold.
  // Every replica may list all of them, itself included. `warm_timeout_s` bounds each.
  // `warm_keep_s`: the snapshot is kept that long after start for workers that join later
  // (discovery): each gets its blocks from it at its join; 0: only static workers and the
  // shared store are warmed.
  // `etcd_prefix` (needs discovery.etcd): replicas also find each other in etcd
  // (gateway/replica_registry.h), each registering `advertise_url` (default
  // http://<listen.host>:<port>; required when listen.host is a wildcard) once it listens.
  // `share_bookings` (docs/replicas.md): with siblings (warm_from or etcd_prefix), publish
  // this replica's bookings and predicted blocks on GET /admin/replica/deltas and apply every
  // sibling's; `delta_flush_ms` is the longest a delta waits for its frame;
  // `remote_booking_ttl_s` bounds a remote booking whose release never came.
  struct Replicas {
    std::vector<std::string> warm_from;
    double warm_timeout_s = 3.0;
    double warm_keep_s = 30.0;
    std::string etcd_prefix;  // empty: not in etcd
    std::string advertise_url;
    bool share_bookings = true;
    double delta_flush_ms = 20.0;
    double remote_booking_ttl_s = 300.0;
    bool HasSiblings() const { return !warm_from.empty() || !etcd_prefix.empty(); }
  } replicas;

  // scheduler.policy as YAML text: "preset: predicted_latency" or a full spec (sched/registry.h).
  std::string policy_yaml = "preset: predicted_latency";
  std::uint64_t scheduler_seed = 1;
  // scheduler.itl_slo_s: the per-user inter-token target the operator runs for, seconds
  // (0.033 = 30 tokens/s/user). Given to the policy as every request's ITL SLO, so an
  // itl_guard judges workers against it rather than its own itl_slo_s; 0: the policy's.
  double itl_slo_s = 0;

  RoutingMode mode = RoutingMode::kPrecise;
  TokenizerConfig tokenizer;
  // Engine KV block size in tokens; 0: learn from the workers' cache_config_info, 16 until known.
  std::uint32_t block_size = 0;
  // How long a routed prefix counts as cached before the engine's events confirm it, seconds
  // (precise mode's predict-on-route overlay); approximate mode uses approx_ttl_s.
  double predicted_ttl_s = 5;
  double approx_ttl_s = 120;

  FailureMode failure_mode = FailureMode::kFailOpen;
  UpstreamTimeouts timeouts;
  LimitsConfig limits;
  std::vector<std::string> api_keys;  // bearer tokens; empty: no authentication
  TenancyConfig tenancy;
  ImagesConfig images;
  PdConfig pd;  // pd: prefill/decode disaggregation (gateway/pd_config.h)

  // Before serving, probe every worker's block size, tokenizer, chat template and (precise
  // mode) block keys (gateway/parity_probe.h); a mismatch is a warning naming the worker and
  // the setting, and kvroute_parity_mismatch. `parity_probe_timeout_s` bounds each exchange
  // and the wait for the probe's KV event.
  bool parity_probe = true;
  double parity_probe_timeout_s = 3.0;

  double scrape_interval_s = 1.0;  // GET /metrics of each worker
  double health_interval_s = 2.0;  // GET /health of each worker

  // Shutdown: after SIGTERM readiness is false; new connections are still accepted for
  // `shutdown_grace_s` (load balancers notice), then refused; in-flight requests run until
  // `drain_timeout_s`, then are cut.
  double shutdown_grace_s = 1.0;
  double drain_timeout_s = 30.0;
  // What the surroundings give, for the invariants of gateway/shutdown_timeline.h (checked
  // by `kvroute config check` and at start; 0: not said, nothing checked): the
  // orchestrator's time from SIGTERM to SIGKILL, and how long the balancer in front takes to
  // stop choosing a replica whose /ready answers 503.
  double termination_grace_s = 0;
  double balancer_notice_s = 0;

  std::string log_level = "info";

  // epp: kvroute also serves Envoy's ext_proc (the Gateway API Inference Extension's Endpoint
  // Picker protocol) on `epp.address`, beside the HTTP gateway, deciding and booking exactly as
  // the HTTP path does (docs/kubernetes.md). Needs a build with Debian's gRPC.
  struct Epp {
    bool enabled = false;
    std::string address = "0.0.0.0:9002";  // host:port; port 0 picks a free one
    // epp.objectives: InferenceObjective name → its priority (x-gateway-inference-objective;
    // unknown or none: 0; negative: sheddable). epp.saturation: a sheddable request gets 429
    // when every candidate shows >= queue_depth waiting, KV usage >= kv_usage, or no scrape
    // younger than metrics_max_age_s (extproc/epp_admission.h).
    std::map<std::string, int> objectives;
    // epp.watch_objectives: with discovery.kubernetes, also follow the pool's
    // InferenceObjective and InferenceModelRewrite objects (llm-d.ai and
    // inference.networking.x-k8s.io v1alpha2; extproc/epp_policy.h): their priorities
    // override `objectives`, their rules rewrite request models.
    bool watch_objectives = true;
    int saturation_queue_depth = 5;
    double saturation_kv_usage = 0.8;
    double saturation_metrics_max_age_s = 2.0;
  } epp;

  // Fault injection for tests and drills (documented in docs/operations.md):
  //   "" none; "schedule_error": every scheduling attempt fails as if the policy reported
  //   an error, so failure_mode decides.
  std::string debug_fault;
};

// Parses and validates a YAML document. Unknown keys are errors. The policy is built once to
// validate it (its errors are prefixed "scheduler.policy.").
std::expected<GatewayConfig, std::string> ParseConfig(std::string_view yaml_text);
std::expected<GatewayConfig, std::string> LoadConfigFile(const std::string& path);

// Checks ranges, names, URLs and the policy of an assembled config (after flag overrides).
std::expected<void, std::string> Validate(const GatewayConfig& config);

// Command-line overrides (kvroute serve / config check flags); unset ones leave the file's.
struct ConfigOverrides {
  std::optional<std::string> host;
  std::optional<int> port;
  std::optional<std::string> policy;  // a preset name, or policy YAML text
  std::optional<std::string> log_level;
  std::optional<double> drain_timeout_s;
  std::optional<std::string> etcd;         // --etcd: comma-separated endpoints
  std::optional<std::string> etcd_prefix;  // --etcd-prefix
  std::optional<std::string> inference_pool;  // --inference-pool: discovery.kubernetes.pool
  std::optional<std::string> epp_address;  // --epp: enables epp at this address
};
void ApplyOverrides(const ConfigOverrides& overrides, GatewayConfig* config);

// LoadConfigFile + ApplyOverrides + Validate: what `kvroute serve` will run with. Errors are
// prefixed with the file name.
std::expected<GatewayConfig, std::string> LoadConfig(const std::string& path,
                                                     const ConfigOverrides& overrides);

// The configuration as YAML with every default resolved (re-parses to the same config).
std::string EffectiveYaml(const GatewayConfig& config);

}  // namespace kvroute::gateway
