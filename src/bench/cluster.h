// A local cluster for `kvroute bench compare` and `kvroute demo`: N `kvroute sim` children
// (the running binary itself) with KV events on explicit loopback ports, and one router in
// front of them: nginx (round robin or least_conn) or `kvroute serve` with a policy preset.
//
// Router names: "nginx-rr", "nginx-lc", "kvroute:<preset>" (round_robin, predicted_latency,
// dynamo_cost, ...). Each child writes its log (and nginx/serve their configuration) into
// `dir`, which survives the run for post-mortems. `kvroute serve` is told each sim's profile
// and speedup (its rate seeds and KV bytes per block come from them), so a non-default
// profile and a sped-up fleet are modelled on both sides. ServeYaml is the one writer of that
// configuration, and SpawnServe / SpawnNginx the one way a router is started: `bench overhead`
// (overhead_procs.h) uses them too.
//
// Ownership: the Cluster owns its children; Stop() (and the destructor) stops the router
// first, then the sims, then the shared store if there is one. Thread safety: one thread.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "bench/cluster_process.h"
#include "bench/nginx.h"

namespace kvroute::bench {

// One sim of a heterogeneous cluster (bench compare --topology, bench/topology.h): its own
// flags after the common ones, and what kvroute serve is told about it.
struct SimLaunch {
  std::string profile;                  // empty: ClusterOptions::profile
  std::vector<std::string> extra_argv;  // engine settings, NixlConnector role, KV link
  std::string role;                     // serve's workers[].role; empty: not written (mixed)
  std::uint32_t tp = 0, gpus = 0;       // serve's workers[].tp / gpus; 0: not written
  std::string link;                     // serve's workers[].link; empty: not written
};

struct ClusterOptions {
  std::string exe;  // the kvroute binary; empty: SelfExe()
  int workers = 4;  // ignored when `launches` is not empty
  // One sim per entry, each with its own profile and flags; empty: `workers` identical sims.
  std::vector<SimLaunch> launches;
  // `kvroute serve`'s pd.rule when a sim has a P/D role (cost, dynamo_token_cap, ...).
  std::string pd_rule = "cost";
  // pd.token_cap (dynamo_token_cap: split above this many uncached tokens); < 0: not written.
  std::int64_t pd_token_cap = -1;
  // pd.non_cached_tokens (llmd_non_cached: split at >= this many); < 0: not written.
  std::int64_t pd_non_cached_tokens = -1;
  std::string profile;  // empty: the sim's default
  std::uint64_t seed = 1;
  double speedup = 1;
  // The sims' context length; 0: the profile's. The agentic workload's contexts (up to ~118k
  // tokens) need more than Qwen3-32B's native 40,960 (131,072 with YaRN, per its model card).
  std::uint32_t max_model_len = 0;
  // KV blocks of each sim's host-memory (CPU) tier, vLLM's CPU offload; 0: none. Evicted
  // blocks go there and come back at the profile's host-to-GPU bandwidth.
  std::int64_t num_cpu_blocks = 0;
  // KV blocks of each sim's local disk tier (below the CPU tier); 0: none.
  std::int64_t num_disk_blocks = 0;
  // A cluster-wide `kvroute store` of this many GB, started fresh with the sims (each sim
  // writes through to it and loads from it; serve indexes its events); 0: none.
  double kv_store_gb = 0;
  // `kvroute serve`'s scheduler.itl_slo_s, wall seconds (the per-user ITL target the ITL
  // guard judges against); 0: not written, the policy's own SLO applies. bench compare sets
  // it to 1 / (first Infera target tokens/s) / speedup: the sims run `speedup` times faster
  // than the model, so the router, which measures wall time, sees ITLs that much shorter.
  double itl_slo_s = 0;
  std::string dir;  // logs and configs; created
  double ready_timeout_s = 30;
};

struct SimInfo {
  std::string url;          // http://127.0.0.1:P
  std::string kv_endpoint;  // tcp://127.0.0.1:Q
  std::string model;
  // What the sim was started with (the ready line does not say; StartedSimInfo adds them):
  // its engine profile (empty: the sim's default) and how much faster than that profile it
  // runs. ServeYaml writes both on the sim's worker.
  std::string profile;
  double speedup = 1;
  // From its SimLaunch (empty / 0 for a homogeneous cluster): serve's role, tp, gpus, link.
  std::string role;
  std::uint32_t tp = 0, gpus = 0;
  std::string link;
};

// Parses a ready line "kvroute sim listening on http://H:P model=M kv_events=E ...".
std::expected<SimInfo, std::string> ParseSimReadyLine(const std::string& line);
// The SimInfo of a sim started by SimArgv(options) that printed `ready_line`: the parsed line
// plus the options' profile and speedup.
std::expected<SimInfo, std::string> StartedSimInfo(const std::string& ready_line,
                                                   const ClusterOptions& options);
// "kvroute serve listening on http://H:P ..." → "http://H:P".
std::expected<std::string, std::string> ParseServeReadyLine(const std::string& line);
// The command line of one sim (options.exe first). Its KV events are BOUND on a loopback port
// the OS picks ("tcp://127.0.0.1:*"; the ready line names it): an endpoint without '*' would
// make the sim connect (vLLM's convention), and kvroute serve, told "tcp://*:P", connects
// too, so no event would ever flow.
std::vector<std::string> SimArgv(const ClusterOptions& options);
// The command line of one sim of a heterogeneous cluster: SimArgv with `launch`'s profile
// instead of the options' and its extra flags appended.
std::vector<std::string> SimArgv(const ClusterOptions& options, const SimLaunch& launch);
// What differs between the `kvroute serve` configurations the bench writes (`bench compare`
// and `demo`: an ITL SLO; `bench overhead`: a lane count). What describes a worker comes from
// its SimInfo instead, so every caller models the sims alike.
struct ServeConfigOptions {
  std::string policy;  // a scheduler preset name (round_robin, predicted_latency, ...)
  std::uint64_t seed = 1;
  // scheduler.itl_slo_s, wall seconds (the per-user ITL target the ITL guard judges against);
  // 0: not written, the policy's own SLO applies.
  double itl_slo_s = 0;
  // listen.http_threads and listen.proxy_threads (the event loops the server and proxy
  // share); 0: not written, serve's default (one per CPU it may run on when it starts).
  int lanes = 0;
  // pd.rule, written (as `pd: {rule: ...}`) only when some sim has a role.
  std::string pd_rule = "cost";
  std::int64_t pd_token_cap = -1;  // pd.token_cap; < 0: not written
  std::int64_t pd_non_cached_tokens = -1;  // pd.non_cached_tokens; < 0: not written
  // The store's ready-line endpoints (`kv_events=`, `kv_replay=`); empty: no kv_store written.
  std::string kv_store_events;
  std::string kv_store_replay;
};
// `kvroute serve`'s configuration in front of `sims`: loopback on a port the OS picks,
// precise mode, one worker per sim (its URL, model, KV events when it publishes them,
// `profile` when it has one, `profile_speedup` when its speedup is not 1), the policy and seed,
// and the shared store's events when there is one.
std::string ServeYaml(const std::vector<SimInfo>& sims, const ServeConfigOptions& options);
// The wall-time ITL SLO for a per-user target of `target_tokens_per_s` (model time) on sims
// running `speedup` times faster; 0 when either is not positive.
double WallItlSlo(double target_tokens_per_s, double speedup);
// Whether `router` is a name this file knows how to start.
bool IsKnownRouterName(const std::string& router);
// The folder of `router`'s logs and configuration: its name with ':' as '_'
// ("kvroute:round_robin" → "kvroute_round_robin").
std::string RouterDirName(std::string router);

// A router child started in front of the sims and the URL it answers on. Its /health is not
// yet known to answer: the caller waits for that.
struct StartedRouter {
  ChildProcess process;
  std::string url;  // http://127.0.0.1:P
};
// Starts `kvroute serve` (`exe`) with `yaml` written to <dir>/serve.yaml, its log in
// <dir>/serve.log (a previous one removed), and returns once it printed its ready line.
std::expected<StartedRouter, std::string> SpawnServe(const std::string& exe, const std::string& dir,
                                                     const std::string& yaml,
                                                     double ready_timeout_s);
// nginx's options in front of `sims`: every sim upstream, a free loopback port, `dir` made
// absolute (nginx resolves its paths against it). The caller sets the rest (least_conn).
std::expected<NginxOptions, std::string> NginxFor(const std::vector<SimInfo>& sims,
                                                  const std::string& dir);
// Starts nginx with `config` (made from `options`) written to <options.dir>/nginx.conf.
std::expected<StartedRouter, std::string> SpawnNginx(const NginxOptions& options,
                                                     const std::string& config);

class Cluster {
 public:
  explicit Cluster(ClusterOptions options);
  ~Cluster() { Stop(); }
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Starts the sims and waits for their /health.
  std::expected<void, std::string> StartSims();
  // Starts `router` in front of the sims and waits until it proxies /health.
  std::expected<void, std::string> StartRouter(const std::string& router);
  void Stop();

  const std::vector<SimInfo>& sims() const { return sims_; }
  const std::string& router_url() const { return router_url_; }
  std::vector<pid_t> pids() const;

 private:
  std::expected<StartedRouter, std::string> StartNginx(bool least_conn, const std::string& dir);
  std::expected<StartedRouter, std::string> StartServe(const std::string& policy,
                                                       const std::string& dir);

  // The shared store (ClusterOptions::kv_store_gb), started before the sims.
  std::expected<void, std::string> StartStore();

  ClusterOptions options_;
  ChildProcess store_;
  std::string store_address_;  // host:port for the sims' --kv-store
  std::string store_events_, store_replay_;
  std::vector<ChildProcess> sim_processes_;
  std::vector<SimInfo> sims_;
  ChildProcess router_;
  std::string router_url_;
};

}  // namespace kvroute::bench
