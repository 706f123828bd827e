#include "bench/cluster.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvroute::bench {
namespace {

constexpr const char* kNginx = "/usr/sbin/nginx";

// The value after "key=" in a space-separated ready line.
std::string Field(const std::string& line, const std::string& key) {
  const auto at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const auto start = at + key.size() + 2;
  const auto end = line.find(' ', start);
  return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::expected<std::string, std::string> UrlAfter(const std::string& line,
                                                 const std::string& prefix) {
  if (!line.starts_with(prefix)) return std::unexpected("not a ready line: " + line);
  const auto start = prefix.size();
  const auto end = line.find(' ', start);
  std::string url = line.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (!url.starts_with("http://")) return std::unexpected("no URL in: " + line);
  return url;
}

std::string HostPort(const std::string& url) { return url.substr(std::string("http://").size()); }

// serve's form of an endpoint a child bound on loopback ("tcp://127.0.0.1:P"): "tcp://*:P",
// which kvroute connects to on the worker's (or kv_store's) host.
std::string ConnectForm(const std::string& bound) {
  return "tcp://*:" + bound.substr(bound.rfind(':') + 1);
}

}  // namespace

std::expected<SimInfo, std::string> ParseSimReadyLine(const std::string& line) {
  auto url = UrlAfter(line, "kvroute sim listening on ");
  if (!url) return std::unexpected(url.error());
  SimInfo info;
  info.url = *url;
  info.model = Field(line, "model");
  info.kv_endpoint = Field(line, "kv_events");
  if (info.kv_endpoint == "off") info.kv_endpoint.clear();
  return info;
}

std::expected<SimInfo, std::string> StartedSimInfo(const std::string& ready_line,
                                                   const ClusterOptions& options) {
  auto info = ParseSimReadyLine(ready_line);
  if (!info) return info;
  info->profile = options.profile;
  info->speedup = options.speedup;
  return info;
}

std::expected<std::string, std::string> ParseServeReadyLine(const std::string& line) {
  return UrlAfter(line, "kvroute serve listening on ");
}

bool IsKnownRouterName(const std::string& router) {
  return router == "nginx-rr" || router == "nginx-lc" ||
         (router.starts_with("kvroute:") && router.size() > 8);
}

std::string RouterDirName(std::string router) {
  for (char& c : router) {
    if (c == ':') c = '_';
  }
  return router;
}

std::expected<StartedRouter, std::string> SpawnServe(const std::string& exe, const std::string& dir,
                                                     const std::string& yaml,
                                                     double ready_timeout_s) {
  const std::string conf = dir + "/serve.yaml";
  std::ofstream(conf) << yaml;
  const std::string log = dir + "/serve.log";
  std::error_code ec;
  std::filesystem::remove(log, ec);
  auto child = ChildProcess::Spawn({exe, "serve", "--config", conf}, log);
  if (!child) return std::unexpected("kvroute serve: " + child.error());
  // On an error below, `child` stops the process as it goes out of scope.
  auto line = child->WaitForLine("kvroute serve listening on ", ready_timeout_s);
  if (!line) return std::unexpected("kvroute serve: " + line.error());
  auto url = ParseServeReadyLine(*line);
  if (!url) return std::unexpected("kvroute serve: " + url.error());
  return StartedRouter{std::move(*child), *url};
}

std::expected<NginxOptions, std::string> NginxFor(const std::vector<SimInfo>& sims,
                                                  const std::string& dir) {
  auto port = FreeLoopbackPort();
  if (!port) return std::unexpected(port.error());
  NginxOptions n;
  for (const auto& s : sims) n.upstreams.push_back(HostPort(s.url));
  n.listen_port = *port;
  n.dir = std::filesystem::absolute(dir).string();
  return n;
}

std::expected<StartedRouter, std::string> SpawnNginx(const NginxOptions& options,
                                                     const std::string& config) {
  const std::string conf = options.dir + "/nginx.conf";
  std::ofstream(conf) << config;
  // -e: the error log before the configuration is read (the default path may not be writable).
  auto child =
      ChildProcess::Spawn({kNginx, "-e", options.dir + "/error.log", "-p", options.dir, "-c", conf},
                          options.dir + "/nginx.log");
  if (!child) return std::unexpected("nginx: " + child.error());
  return StartedRouter{std::move(*child),
                       "http://127.0.0.1:" + std::to_string(options.listen_port)};
}

std::vector<std::string> SimArgv(const ClusterOptions& options) {
  std::ostringstream speedup, seed;
  speedup << options.speedup;
  seed << options.seed;
  std::vector<std::string> argv = {options.exe, "sim", "--host", "127.0.0.1", "--port", "0",
                                   "--seed", seed.str(), "--speedup", speedup.str(),
                                   "--shutdown-timeout", "1",
                                   // A '*' makes the sim bind (vLLM's convention: an
                                   // endpoint without one is connected to); loopback only,
                                   // on a port the OS picks. The ready line names it.
                                   "--kv-events-endpoint", "tcp://127.0.0.1:*"};
  if (!options.profile.empty()) {
    argv.push_back("--profile");
    argv.push_back(options.profile);
  }
  if (options.max_model_len > 0) {
    argv.push_back("--max-model-len");
    argv.push_back(std::to_string(options.max_model_len));
  }
  if (options.num_cpu_blocks > 0) {
    argv.push_back("--num-cpu-blocks");
    argv.push_back(std::to_string(options.num_cpu_blocks));
  }
  if (options.num_disk_blocks > 0) {
    argv.push_back("--num-disk-blocks");
    argv.push_back(std::to_string(options.num_disk_blocks));
  }
  return argv;
}

std::vector<std::string> SimArgv(const ClusterOptions& options, const SimLaunch& launch) {
  ClusterOptions own = options;
  if (!launch.profile.empty()) own.profile = launch.profile;
  std::vector<std::string> argv = SimArgv(own);
  argv.insert(argv.end(), launch.extra_argv.begin(), launch.extra_argv.end());
  return argv;
}

double WallItlSlo(double target_tokens_per_s, double speedup) {
  if (!(target_tokens_per_s > 0) || !(speedup > 0)) return 0;
  return 1.0 / target_tokens_per_s / speedup;
}

std::string ServeYaml(const std::vector<SimInfo>& sims, const ServeConfigOptions& options) {
  std::ostringstream y;
  y << "listen: {host: 127.0.0.1, port: 0";
  if (options.lanes > 0) {
    y << ", http_threads: " << options.lanes << ", proxy_threads: " << options.lanes;
  }
  y << "}\nworkers:\n";
  for (std::size_t i = 0; i < sims.size(); ++i) {
    const SimInfo& s = sims[i];
    y << "  - name: sim" << i << "\n    url: " << s.url << "\n    model: " << s.model << "\n";
    // The sim's profile, so the router seeds its rates and sizes KV blocks for that model
    // rather than for the default one.
    if (!s.profile.empty()) y << "    profile: \"" << s.profile << "\"\n";
    // The sim runs `speedup` times faster than that profile: seed the router for its pace.
    if (s.speedup > 0 && s.speedup != 1) y << "    profile_speedup: " << s.speedup << "\n";
    if (!s.kv_endpoint.empty()) {
      y << "    kv_events: {endpoint: \"" << ConnectForm(s.kv_endpoint) << "\"}\n";
    }
    if (!s.role.empty()) y << "    role: " << s.role << "\n";
    if (s.tp > 0) y << "    tp: " << s.tp << "\n";
    if (s.gpus > 0) y << "    gpus: " << s.gpus << "\n";
    if (!s.link.empty()) y << "    link: \"" << s.link << "\"\n";
  }
  if (!options.kv_store_events.empty()) {
    y << "kv_store:\n  host: 127.0.0.1\n  kv_events: {endpoint: \""
      << ConnectForm(options.kv_store_events) << "\"";
    if (!options.kv_store_replay.empty()) {
      y << ", replay_endpoint: \"" << options.kv_store_replay << "\"";
    }
    y << "}\n";
  }
  const bool has_roles = std::any_of(sims.begin(), sims.end(), [](const SimInfo& s) {
    return !s.role.empty() && s.role != "mixed";
  });
  if (has_roles && !options.pd_rule.empty()) {
    y << "pd: {rule: " << options.pd_rule;
    if (options.pd_token_cap >= 0) y << ", token_cap: " << options.pd_token_cap;
    if (options.pd_non_cached_tokens >= 0) {
      y << ", non_cached_tokens: " << options.pd_non_cached_tokens;
    }
    y << "}\n";
  }
  y << "scheduler: {policy: " << options.policy << ", seed: " << options.seed;
  if (options.itl_slo_s > 0) {
    // Full precision: a 33 ms target at speedup 10 is 0.00333... s.
    std::ostringstream slo;
    slo.precision(17);
    slo << options.itl_slo_s;
    y << ", itl_slo_s: " << slo.str();
  }
  y << "}\nmode: precise\n";
  return y.str();
}

Cluster::Cluster(ClusterOptions options) : options_(std::move(options)) {
  if (options_.exe.empty()) options_.exe = SelfExe();
}

std::expected<void, std::string> Cluster::StartStore() {
  std::ostringstream gb;
  gb << options_.kv_store_gb;
  const std::string log = options_.dir + "/store.log";
  std::error_code ec;
  std::filesystem::remove(log, ec);
  auto child = ChildProcess::Spawn(
      {options_.exe, "store", "--host", "127.0.0.1", "--port", "0", "--capacity-gb", gb.str(),
       "--kv-events-endpoint", "tcp://127.0.0.1:*", "--kv-events-replay-endpoint",
       "tcp://127.0.0.1:*"},
      log);
  if (!child) return std::unexpected("store: " + child.error());
  store_ = std::move(*child);
  auto line = store_.WaitForLine("kvroute store listening on ", options_.ready_timeout_s);
  if (!line) return std::unexpected("store: " + line.error());
  auto url = UrlAfter(*line, "kvroute store listening on ");
  if (!url) return std::unexpected("store: " + url.error());
  store_address_ = HostPort(*url);
  store_events_ = Field(*line, "kv_events");
  store_replay_ = Field(*line, "kv_replay");
  if (store_events_.empty()) return std::unexpected("store: no kv_events in " + *line);
  return {};
}

std::expected<void, std::string> Cluster::StartSims() {
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (ec) return std::unexpected("cannot create " + options_.dir + ": " + ec.message());
  if (options_.kv_store_gb > 0) {
    if (auto ok = StartStore(); !ok) return ok;
  }
  // Start all, then wait for all: the sims come up in parallel.
  const int count = options_.launches.empty() ? options_.workers
                                              : static_cast<int>(options_.launches.size());
  for (int i = 0; i < count; ++i) {
    const auto at = static_cast<std::size_t>(i);
    std::vector<std::string> argv =
        options_.launches.empty() ? SimArgv(options_) : SimArgv(options_, options_.launches[at]);
    if (!store_address_.empty()) {
      argv.push_back("--kv-store");
      argv.push_back(store_address_);
    }
    const std::string log = options_.dir + "/sim" + std::to_string(i) + ".log";
    std::filesystem::remove(log, ec);
    auto child = ChildProcess::Spawn(argv, log);
    if (!child) return std::unexpected("sim " + std::to_string(i) + ": " + child.error());
    sim_processes_.push_back(std::move(*child));
  }
  for (std::size_t i = 0; i < sim_processes_.size(); ++i) {
    auto line =
        sim_processes_[i].WaitForLine("kvroute sim listening on ", options_.ready_timeout_s);
    if (!line) return std::unexpected("sim " + std::to_string(i) + ": " + line.error());
    auto info = StartedSimInfo(*line, options_);
    if (!info) return std::unexpected(info.error());
    if (i < options_.launches.size()) {
      const SimLaunch& launch = options_.launches[i];
      if (!launch.profile.empty()) info->profile = launch.profile;
      info->role = launch.role;
      info->tp = launch.tp;
      info->gpus = launch.gpus;
      info->link = launch.link;
    }
    if (!WaitHttpOk(info->url + "/health", options_.ready_timeout_s)) {
      return std::unexpected("sim " + info->url + " never answered /health");
    }
    sims_.push_back(*info);
  }
  return {};
}

std::expected<void, std::string> Cluster::StartRouter(const std::string& router) {
  if (!IsKnownRouterName(router)) return std::unexpected("unknown router " + router);
  const std::string dir = options_.dir + "/" + RouterDirName(router);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return std::unexpected("cannot create " + dir + ": " + ec.message());
  auto started = router.starts_with("nginx-") ? StartNginx(router == "nginx-lc", dir)
                                              : StartServe(router.substr(8), dir);
  if (!started) return std::unexpected(started.error());
  router_ = std::move(started->process);
  router_url_ = started->url;
  if (!WaitHttpOk(router_url_ + "/health", options_.ready_timeout_s)) {
    return std::unexpected(router + " never answered /health; see " + router_.log_path());
  }
  return {};
}

std::expected<StartedRouter, std::string> Cluster::StartNginx(bool least_conn,
                                                              const std::string& dir) {
  auto n = NginxFor(sims_, dir);
  if (!n) return std::unexpected(n.error());
  n->least_conn = least_conn;
  return SpawnNginx(*n, NginxConfig(*n));
}

std::expected<StartedRouter, std::string> Cluster::StartServe(const std::string& policy,
                                                              const std::string& dir) {
  ServeConfigOptions serve;
  serve.policy = policy;
  serve.seed = options_.seed;
  serve.itl_slo_s = options_.itl_slo_s;
  serve.pd_rule = options_.pd_rule;
  serve.pd_token_cap = options_.pd_token_cap;
  serve.pd_non_cached_tokens = options_.pd_non_cached_tokens;
  serve.kv_store_events = store_events_;
  serve.kv_store_replay = store_replay_;
  return SpawnServe(options_.exe, dir, ServeYaml(sims_, serve), options_.ready_timeout_s);
}

void Cluster::Stop() {
  router_.Stop();
  for (auto& p : sim_processes_) p.Stop();
  sim_processes_.clear();
  sims_.clear();
  router_url_.clear();
  store_.Stop();
  store_address_.clear();
  store_events_.clear();
  store_replay_.clear();
}

std::vector<pid_t> Cluster::pids() const {
  std::vector<pid_t> out;
  for (const auto& p : sim_processes_) out.push_back(p.pid());
  if (router_.pid() > 0) out.push_back(router_.pid());
  if (store_.pid() > 0) out.push_back(store_.pid());
  return out;
}

}  // namespace kvroute::bench
