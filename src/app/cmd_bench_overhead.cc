// kvroute bench overhead: flag parsing around bench::RunOverhead (src/bench/overhead_run.h)
// and its writers. No logic here beyond turning flags into options and options into files.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "bench/cluster_process.h"
#include "bench/overhead_run.h"
#include "workload/report.h"

namespace kvroute::app {
namespace {

struct OverheadFlags {
  bench::OverheadOptions run;
  bool no_progress = false;
};

int RunOverheadCommand(OverheadFlags f) {
  f.run.progress = !f.no_progress;
  bench::InstallChildCleanupHandlers();  // Ctrl-C kills the sims and routers, then exits
  auto report = bench::RunOverhead(f.run);
  if (!report) {
    std::cerr << "kvroute bench overhead: " << report.error() << "\n";
    return 2;
  }
  std::cout << bench::OverheadTable(*report);
  if (auto wrote = bench::WriteOverheadFiles(*report, f.run.out_dir); !wrote) {
    std::cerr << "kvroute bench overhead: " << wrote.error() << "\n";
    return 2;
  }
  const std::string stem = f.run.out_dir + "/" + workload::FileStem(f.run.label);
  std::cout << "wrote " << stem << ".json, " << stem << ".csv; logs in " << f.run.out_dir
            << "/cluster/\n";
  for (const auto& level : report->levels) {
    if (level.ok == 0) return 1;  // a target that answered nothing is a failed run
  }
  return 0;
}

}  // namespace

void RegisterBenchOverheadCommand(CLI::App* bench, int* exit_code) {
  auto flags = std::make_shared<OverheadFlags>();
  auto& r = flags->run;
  auto* cmd = bench->add_subcommand(
      "overhead",
      "Proxy overhead, side by side in one run: start --workers fast local sims (--speedup)\n"
      "and put nginx round robin and kvroute serve (--policy, and round_robin to separate\n"
      "routing from proxying) in front of them; then for each --concurrency level run the same\n"
      "closed loop against each target in turn: direct to the sims (the client spreads the\n"
      "requests: no proxy), nginx-rr, kvroute. Reports req/s, streamed chunks/s, latency\n"
      "p50/p90/p99 (TTFT when streamed, else E2E), added latency vs direct (at the same\n"
      "percentile and concurrency, percentiles of each run) and req/s vs nginx-rr; writes\n"
      "<out>/<label>.json and .csv.");
  cmd->add_option("--workers", r.workers, "Local sims")
      ->capture_default_str()
      ->check(CLI::Range(1, 32));
  cmd->add_option("--profile", r.profile, "Engine profile of every sim (default: the sim's)");
  cmd->add_option("--speedup", r.speedup,
                  "Sims run this much faster than real time (large: the model server answers "
                  "near-instantly, so the proxies are what differs)")
      ->capture_default_str();
  cmd->add_option("--concurrency", r.concurrency, "Concurrent clients per level: 1,8,32")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--requests", r.requests, "Recorded requests per level (target x concurrency)")
      ->capture_default_str();
  cmd->add_option("--warmup", r.warmup_requests, "Unrecorded requests before each level")
      ->capture_default_str();
  cmd->add_option("--duration", r.duration_s,
                  "Cap in seconds per level, warm-up included (no request starts later)")
      ->capture_default_str();
  cmd->add_option("--prompt-tokens", r.prompt_tokens, "Prompt length of every request")
      ->capture_default_str();
  cmd->add_option("--output-tokens", r.output_tokens,
                  "max_tokens (with ignore_eos) of every request")
      ->capture_default_str();
  cmd->add_flag("--stream,!--no-stream", r.stream,
                "Streamed requests (latency = TTFT) or not (latency = E2E)");
  cmd->add_option("--policy", r.policy, "kvroute serve's policy preset")->capture_default_str();
  cmd->add_option("--targets", r.targets,
                  "Targets in run order (default: direct,nginx-rr,kvroute:<policy>,"
                  "kvroute:round_robin)")
      ->delimiter(',');
  cmd->add_option("--prompt-pool", r.prompt_pool, "Distinct prompts, cycled")
      ->capture_default_str();
  cmd->add_option("--request-timeout", r.request_timeout_s, "Total seconds allowed per request")
      ->capture_default_str();
  cmd->add_option("--cpus-client", r.cpus_client, "Pin the load generator: taskset list, e.g. 0");
  cmd->add_option("--cpus-router", r.cpus_router, "Pin nginx and kvroute serve, e.g. 1");
  cmd->add_option("--cpus-sims", r.cpus_sims, "Pin the sims, e.g. 0-1");
  cmd->add_flag("--fair-pinning", r.fair_pinning,
                "The fair side-by-side protocol: every router (nginx and kvroute) on the last "
                "CPU, the load generator and the sims on the others (a --cpus-* list given "
                "explicitly wins)");
  cmd->add_option("--router-lanes", r.router_lanes,
                  "Event-loop threads of every router alike: kvroute serve's lanes and nginx's "
                  "worker processes (0: the routers' CPU count when pinned, else 1)")
      ->capture_default_str();
  cmd->add_option("--router-exe", r.router_exe,
                  "kvroute binary to run as the kvroute:<policy> routers (default: this one): "
                  "compares another build's proxy against the same sims and nginx");
  cmd->add_option("--seed", r.seed, "Seed of the prompts and the sims")->capture_default_str();
  cmd->add_option("--out", r.out_dir, "Output folder")->capture_default_str();
  cmd->add_option("--label", r.label, "Names the output files")->capture_default_str();
  cmd->add_flag("--no-progress", flags->no_progress, "No progress lines on stderr");
  cmd->callback([flags, exit_code] { *exit_code = RunOverheadCommand(*flags); });
}

}  // namespace kvroute::app
