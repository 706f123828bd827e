#include "bench/overhead_run.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "bench/cluster.h"
#include "bench/overhead_load.h"
#include "bench/overhead_procs.h"
#include "workload/report.h"
#include "workload/workload.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::bench {
namespace {

double LoadAverage1m() {
  std::ifstream in("/proc/loadavg");
  double v = -1;
  if (!(in >> v)) return -1;
  return v;
}

std::string NowIso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The options with --fair-pinning applied to the --cpus-* lists not given explicitly.
std::expected<OverheadOptions, std::string> ApplyFairPinning(OverheadOptions o) {
  if (!o.fair_pinning) return o;
  auto fair = FairPlacement(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  if (!fair) return std::unexpected(fair.error());
  if (o.cpus_client.empty()) o.cpus_client = fair->client;
  if (o.cpus_router.empty()) o.cpus_router = fair->router;
  if (o.cpus_sims.empty()) o.cpus_sims = fair->sims;
  return o;
}

std::string Pinning(const OverheadOptions& o) {
  std::string s;
  auto add = [&s](const char* who, const std::string& cpus) {
    if (cpus.empty()) return;
    if (!s.empty()) s += ", ";
    s += std::string(who) + " on CPU " + cpus;
  };
  add("client", o.cpus_client);
  add("routers", o.cpus_router);
  add("sims", o.cpus_sims);
  return s;
}

struct Placement {
  std::vector<int> client, router, sims;
};

std::expected<Placement, std::string> ParsePlacement(const OverheadOptions& o) {
  Placement p;
  auto client = ParseCpuList(o.cpus_client);
  if (!client) return std::unexpected("--cpus-client: " + client.error());
  auto router = ParseCpuList(o.cpus_router);
  if (!router) return std::unexpected("--cpus-router: " + router.error());
  auto sims = ParseCpuList(o.cpus_sims);
  if (!sims) return std::unexpected("--cpus-sims: " + sims.error());
  p.client = std::move(*client);
  p.router = std::move(*router);
  p.sims = std::move(*sims);
  return p;
}

// CPU seconds so far of the proxy (0 when there is none: direct), the sims and this process.
struct CpuSnapshot {
  std::optional<double> proxy, sims, client;
  std::optional<double> proxy_runq;  // run-queue wait seconds of the proxy's threads
};

CpuSnapshot TakeCpuSnapshot(pid_t proxy_pid, const std::vector<pid_t>& sim_pids) {
  CpuSnapshot s;
  s.proxy = proxy_pid > 0 ? TreeCpuSeconds(proxy_pid) : std::optional<double>(0.0);
  s.proxy_runq = std::optional<double>(0.0);
  if (proxy_pid > 0) {
    const auto sched = TreeSchedSeconds(proxy_pid);
    s.proxy_runq = sched ? std::optional<double>(sched->runq_s) : std::nullopt;
  }
  double sims = 0;
  bool all = true;
  for (pid_t pid : sim_pids) {
    const auto cpu = ProcessCpuSeconds(pid);
    all = all && cpu.has_value();
    sims += cpu.value_or(0);
  }
  if (all) s.sims = sims;
  s.client = ProcessCpuSeconds(getpid());
  return s;
}

double Delta(const std::optional<double>& before, const std::optional<double>& after) {
  return before && after ? *after - *before : -1;
}

}  // namespace

std::vector<std::string> DefaultOverheadTargets(const std::string& policy) {
  std::vector<std::string> t = {"direct", "nginx-rr", "kvroute:" + policy};
  if (policy != "round_robin") t.push_back("kvroute:round_robin");
  return t;
}

int EffectiveRouterLanes(int router_lanes, const std::vector<int>& router_cpus) {
  if (router_lanes > 0) return router_lanes;
  return router_cpus.empty() ? 1 : static_cast<int>(router_cpus.size());
}

std::expected<OverheadReport, std::string> RunOverhead(const OverheadOptions& given) {
  auto fair = ApplyFairPinning(given);
  if (!fair) return std::unexpected(fair.error());
  const OverheadOptions& o = *fair;
  if (o.router_lanes < 0) return std::unexpected("--router-lanes must be >= 0");
  if (o.workers < 1) return std::unexpected("--workers must be >= 1");
  if (o.concurrency.empty()) return std::unexpected("no --concurrency level");
  for (int c : o.concurrency) {
    if (c < 1) return std::unexpected("--concurrency levels must be >= 1");
  }
  if (o.warmup_requests < 0) return std::unexpected("--warmup must be >= 0");
  if (o.requests < 1) return std::unexpected("--requests must be >= 1");
  if (!(o.duration_s > 0)) return std::unexpected("--duration must be > 0");
  const std::vector<std::string> targets =
      o.targets.empty() ? DefaultOverheadTargets(o.policy) : o.targets;
  for (const auto& t : targets) {
    if (t != "direct" && t != "nginx-rr" && !(t.starts_with("kvroute:") && t.size() > 8)) {
      return std::unexpected("unknown target " + t + " (direct, nginx-rr, kvroute:<preset>)");
    }
  }
  auto placement = ParsePlacement(o);
  if (!placement) return std::unexpected(placement.error());

  OverheadReport report;
  auto& c = report.config;
  c.label = o.label;
  c.workers = o.workers;
  c.profile = o.profile;
  c.speedup = o.speedup;
  c.stream = o.stream;
  c.prompt_tokens = o.prompt_tokens;
  c.output_tokens = o.output_tokens;
  c.requests = o.requests;
  c.warmup_requests = o.warmup_requests;
  c.duration_s = o.duration_s;
  c.policy = o.policy;
  c.pinning = Pinning(o);
  c.router_lanes = EffectiveRouterLanes(o.router_lanes, placement->router);
  c.started_at = NowIso8601();
  c.load_before = LoadAverage1m();
  c.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));

  ClusterOptions co;
  co.exe = o.exe;
  co.workers = o.workers;
  co.profile = o.profile;
  co.seed = o.seed;
  co.speedup = o.speedup;
  co.dir = o.out_dir + "/cluster";
  if (o.progress) std::cerr << "[overhead] starting " << o.workers << " sims" << std::endl;
  Cluster cluster(co);
  if (auto ok = cluster.StartSims(); !ok) return std::unexpected("sims: " + ok.error());
  OverheadRouters routers(o.router_exe.empty() ? o.exe : o.router_exe, co.dir, c.router_lanes);
  for (const auto& t : targets) {
    if (t == "direct") continue;
    if (o.progress) std::cerr << "[overhead] starting " << t << std::endl;
    if (auto ok = routers.Start(t, cluster.sims(), o.seed, co.ready_timeout_s); !ok) {
      return std::unexpected(ok.error());
    }
  }
  for (pid_t pid : cluster.pids()) {
    if (auto ok = PinProcess(pid, placement->sims); !ok) return std::unexpected(ok.error());
  }
  for (auto& r : routers.routers()) {
    for (pid_t pid : ProcessTree(r.process.pid())) {  // nginx's workers too
      if (auto ok = PinProcess(pid, placement->router); !ok) return std::unexpected(ok.error());
    }
  }
  if (auto ok = PinProcess(getpid(), placement->client); !ok) return std::unexpected(ok.error());

  const std::string model = cluster.sims().front().model;
  tokenize::SimpleTokenizer tokenizer;  // what kvroute sim counts tokens with
  std::vector<std::string> bodies;
  for (int i = 0; i < std::max(1, o.prompt_pool); ++i) {
    const std::string prompt =
        workload::MakeText(tokenizer, o.prompt_tokens, o.seed * 1000003ull + static_cast<std::uint64_t>(i));
    bodies.push_back(OverheadChatBody(model, prompt, o.output_tokens, o.stream));
  }
  std::vector<std::string> direct_urls;
  for (const auto& s : cluster.sims()) direct_urls.push_back(s.url);

  std::vector<pid_t> sim_pids;
  for (pid_t pid : cluster.pids()) sim_pids.push_back(pid);
  for (int conc : o.concurrency) {
    for (const auto& t : targets) {
      OverheadLoadOptions load;
      pid_t proxy_pid = -1;
      if (t == "direct") {
        load.urls = direct_urls;
      } else {
        for (auto& r : routers.routers()) {
          if (r.name == t) {
            load.urls = {r.url};
            proxy_pid = r.process.pid();
          }
        }
      }
      load.bodies = bodies;
      load.stream = o.stream;
      load.concurrency = conc;
      load.warmup_requests = o.warmup_requests;
      load.requests = o.requests;
      load.duration_s = o.duration_s;
      load.request_timeout_s = o.request_timeout_s;
      load.progress = o.progress;
      load.progress_label = "c=" + std::to_string(conc) + " " + t;
      const CpuSnapshot before = TakeCpuSnapshot(proxy_pid, sim_pids);
      auto ran = RunOverheadLoad(load);
      if (!ran) return std::unexpected(t + ": " + ran.error());
      const CpuSnapshot after = TakeCpuSnapshot(proxy_pid, sim_pids);
      OverheadLevel level = SummarizeOverheadLevel(t, conc, ran->samples, ran->elapsed_s);
      level.all_requests = ran->completed;
      level.proxy_cpu_s = Delta(before.proxy, after.proxy);
      level.sims_cpu_s = Delta(before.sims, after.sims);
      level.client_cpu_s = Delta(before.client, after.client);
      level.proxy_runq_s = Delta(before.proxy_runq, after.proxy_runq);
      report.levels.push_back(std::move(level));
      if (o.progress) {
        const OverheadLevel& l = report.levels.back();
        std::fprintf(stderr, "[overhead] c=%d %s: %zu ok, %zu errors, %.1f req/s\n", conc,
                     t.c_str(), l.ok, l.errors, l.RequestsPerS());
      }
    }
  }
  c.load_after = LoadAverage1m();
  routers.Stop();
  cluster.Stop();
  return report;
}

std::expected<void, std::string> WriteOverheadFiles(const OverheadReport& report,
                                                    const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return std::unexpected("cannot create " + dir + ": " + ec.message());
  const std::string stem = dir + "/" + workload::FileStem(report.config.label);
  for (const auto& [path, text] :
       {std::pair{stem + ".json", OverheadJson(report)}, {stem + ".csv", OverheadCsv(report)}}) {
    std::ofstream out(path);
    out << text;
    if (!out) return std::unexpected("cannot write " + path);
  }
  return {};
}

}  // namespace kvroute::bench
