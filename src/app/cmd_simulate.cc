// kvroute simulate: flag parsing around simulate::Simulator (one run per level) and the
// report writers shared with `kvroute bench` (same JSON/CSV/plot files), plus the
// simulator's own workers/decisions CSVs. No logic here beyond flags → options → files.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "app/commands.h"
#include "bench/plot.h"
#include "workload/report.h"
#include "sched/registry.h"
#include "simulate/fleet.h"
#include "simulate/sim_report.h"
#include "simulate/simulator.h"

namespace kvroute::app {
namespace {

struct SimulateFlags {
  // Fleet.
  int workers = 8;
  std::string profile = std::string(engine::kDefaultProfileName);
  std::string fleet_file;
  std::vector<std::string> fail, restart, add;
  std::uint32_t block_size = 16, max_num_seqs = 256, max_num_batched_tokens = 8192;
  std::int64_t num_gpu_blocks = 0, num_cpu_blocks = 0;
  std::uint32_t max_model_len = 0;  // 0: each profile's
  // Router.
  std::string policy = "predicted_latency";
  std::string policy_file;
  std::string event_delay = "0", scrape_interval = "1s", predicted_ttl = "5s";
  std::string router_delay = "0", router_delay_per_1k = "0";
  bool no_overlay = false;
  // Workload.
  std::string workload = "agentic";
  workload::AgenticOptions agentic = simulate::DefaultAgenticShape();  // fits the default profile
  std::vector<int> concurrency = {8};
  std::string think_time = "0";
  std::string turn_jitter = "0";
  workload::SharedPrefixOptions shared_prefix;
  std::vector<double> rates = {1};
  int requests_per_rate = 0;
  std::string trace_path;
  double trace_speedup = 1, prefix_multiplier = 1;
  int trace_replicas = 1;
  int output_tokens = 0;
  std::string duration = "0";
  int max_requests = 0;
  std::uint64_t seed = 1;
  // Output.
  std::string label = "simulate";
  std::string out_dir = "simulate-results";
  std::vector<double> itl_targets = {30, 50};
  double ttft_slo = 0, tpot_slo = 0, slo_attainment = 0.9;
  bool no_progress = false, no_plots = false;
};

std::expected<simulate::Fleet, std::string> BuildFleet(const SimulateFlags& f) {
  auto profile = engine::LoadProfile(f.profile);
  if (!profile) return std::unexpected("--profile: " + profile.error());
  simulate::WorkerSpec base;
  base.profile = std::move(*profile);
  base.config.block_size = f.block_size;
  base.config.max_num_seqs = f.max_num_seqs;
  base.config.max_num_batched_tokens = f.max_num_batched_tokens;
  base.config.num_gpu_blocks_override = f.num_gpu_blocks;
  base.config.num_cpu_blocks = f.num_cpu_blocks;
  base.config.max_model_len = f.max_model_len;
  simulate::Fleet fleet;
  if (!f.fleet_file.empty()) {
    std::ifstream in(f.fleet_file);
    if (!in) return std::unexpected("--fleet: cannot read " + f.fleet_file);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = simulate::ParseFleetYaml(text.str(), base);
    if (!parsed) return std::unexpected("--fleet " + f.fleet_file + ": " + parsed.error());
    fleet = std::move(*parsed);
  } else {
    if (f.workers <= 0) return std::unexpected("--workers must be positive");
    fleet.workers.assign(static_cast<std::size_t>(f.workers), base);
  }
  using Kind = simulate::FleetChange::Kind;
  for (const auto& [kind, values] :
       {std::pair{Kind::kFail, &f.fail}, {Kind::kRestart, &f.restart}, {Kind::kAdd, &f.add}}) {
    for (const std::string& v : *values) {
      auto c = simulate::ParseChangeFlag(kind, v, base);
      if (!c) return std::unexpected(c.error());
      fleet.changes.push_back(std::move(*c));
    }
  }
  simulate::SortChanges(&fleet);
  if (auto ok = simulate::ValidateFleet(fleet); !ok) return std::unexpected(ok.error());
  return fleet;
}

std::expected<std::shared_ptr<const sched::Policy>, std::string> BuildPolicy(
    const SimulateFlags& f) {
  if (!f.policy_file.empty()) {
    std::ifstream in(f.policy_file);
    if (!in) return std::unexpected("--policy-file: cannot read " + f.policy_file);
    std::stringstream text;
    text << in.rdbuf();
    auto p = sched::Registry::Builtin().ParsePolicy(text.str());
    if (!p) return std::unexpected("--policy-file: " + p.error().message);
    return *p;
  }
  auto p = sched::BuiltinPolicy(f.policy);
  if (!p) return std::unexpected("--policy: " + p.error().message);
  return *p;
}

int RunSimulate(SimulateFlags f) {
  auto fail = [](const std::string& msg) {
    std::cerr << "kvroute simulate: " << msg << "\n";
    return 2;
  };
  auto fleet = BuildFleet(f);
  if (!fleet) return fail(fleet.error());
  auto policy = BuildPolicy(f);
  if (!policy) return fail(policy.error());
  simulate::SimOptions base;
  base.fleet = std::move(*fleet);
  base.policy = *policy;
  base.seed = f.seed;
  base.max_requests = f.max_requests;
  base.predicted_overlay = !f.no_overlay;
  base.progress = !f.no_progress;
  for (auto [text, out, name] : {std::tuple{&f.event_delay, &base.event_delay, "--event-delay"},
                                 {&f.scrape_interval, &base.scrape_interval, "--scrape-interval"},
                                 {&f.predicted_ttl, &base.predicted_ttl, "--predicted-ttl"},
                                 {&f.duration, &base.duration, "--duration"},
                                 {&f.router_delay, &base.router_delay, "--router-delay"},
                                 {&f.router_delay_per_1k, &base.router_delay_per_1k_tokens,
                                  "--router-delay-per-1k-tokens"}}) {
    auto d = ParseDuration(*text);
    if (!d) return fail(std::string(name) + ": " + d.error());
    *out = *d;
  }
  if (base.scrape_interval.count() <= 0) return fail("--scrape-interval must be positive");
  auto think = ParseDuration(f.think_time);
  if (!think) return fail("--think-time: " + think.error());
  auto jitter = ParseDuration(f.turn_jitter);
  if (!jitter) return fail("--turn-jitter: " + jitter.error());
  if (f.output_tokens > 0) {
    f.agentic.output_tokens = static_cast<std::uint32_t>(f.output_tokens);
    f.shared_prefix.output_tokens = static_cast<std::uint32_t>(f.output_tokens);
  }
  f.agentic.seed = f.shared_prefix.seed = f.seed;

  // One level per concurrency / rate / the trace, each on a fresh cluster.
  struct LevelPlan {
    std::string name;
    int concurrency = 0;
    double rate = 0;
    std::unique_ptr<simulate::Workload> workload;
  };
  std::vector<LevelPlan> plans;
  if (f.workload == "agentic") {
    for (int c : f.concurrency) {
      if (c <= 0) return fail("--concurrency values must be positive");
      simulate::AgenticSimOptions a{f.agentic, c, *think, *jitter};
      plans.push_back({"c=" + std::to_string(c), c, 0, simulate::NewAgenticWorkload(a)});
    }
  } else if (f.workload == "shared-prefix") {
    for (double r : f.rates) {
      if (r <= 0) return fail("--rates values must be positive");
      simulate::SharedPrefixSimOptions s{f.shared_prefix, r, f.requests_per_rate};
      char text[32];
      std::snprintf(text, sizeof text, "%g", r);
      plans.push_back({std::string("rate=") + text, 0, r, simulate::NewSharedPrefixWorkload(s)});
    }
  } else {
    if (f.trace_path.empty()) return fail("--trace FILE is required");
    if (f.trace_speedup <= 0 || f.trace_replicas <= 0 || f.prefix_multiplier <= 0) {
      return fail("--trace-speedup, --trace-replicas and --prefix-multiplier must be positive");
    }
    auto trace = workload::LoadTrace(f.trace_path);
    if (!trace) return fail(f.trace_path + ": " + trace.error());
    double rate = 0;
    if (trace->requests.size() > 1 && trace->requests.back().arrival_s > 0) {
      rate = static_cast<double>(trace->requests.size()) * f.trace_replicas * f.trace_speedup /
             trace->requests.back().arrival_s;
    }
    simulate::TraceSimOptions t{f.trace_speedup, f.prefix_multiplier, f.trace_replicas, f.seed};
    plans.push_back(
        {"trace", 0, rate,
         simulate::NewTraceWorkload(std::make_shared<const workload::Trace>(std::move(*trace)), t)});
  }

  workload::RunReport report;
  report.label = f.label;
  report.target = "simulate";
  report.workload = f.workload;
  report.itl_targets_tps = f.itl_targets;
  if (f.ttft_slo > 0 && f.tpot_slo > 0) {
    report.slo = workload::SloTargets{f.ttft_slo, f.tpot_slo, f.slo_attainment};
  }
  report.config = {
      {"policy", f.policy_file.empty() ? f.policy : f.policy_file},
      {"profile", f.fleet_file.empty() ? f.profile : f.fleet_file},
      {"workers", static_cast<double>(base.fleet.workers.size())},
      {"event_delay_s", ToSeconds(base.event_delay)},
      {"router_delay_s", ToSeconds(base.router_delay)},
      {"router_delay_per_1k_tokens_s", ToSeconds(base.router_delay_per_1k_tokens)},
      {"scrape_interval_s", ToSeconds(base.scrape_interval)},
      {"predicted_overlay", f.no_overlay ? std::string("off") : std::string("on")},
      {"seed", static_cast<double>(f.seed)},
      {"max_requests", static_cast<double>(f.max_requests)},
  };
  if (f.max_model_len > 0) {
    report.config.push_back({"max_model_len", static_cast<double>(f.max_model_len)});
  }
  const auto& a = f.agentic;
  if (f.workload == "agentic") {
    report.config.insert(report.config.end(),
                         {{"sessions", static_cast<double>(a.sessions)},
                          {"common_prefix_tokens", static_cast<double>(a.common_prefix_tokens)},
                          {"session_prefix_tokens", static_cast<double>(a.session_prefix_tokens)},
                          {"turns", static_cast<double>(a.turns)},
                          {"turn_input_tokens", static_cast<double>(a.turn_input_tokens)},
                          {"output_tokens", static_cast<double>(a.output_tokens)},
                          {"think_time_s", ToSeconds(*think)},
                          {"turn_jitter_s", ToSeconds(*jitter)}});
  } else if (f.workload == "shared-prefix") {
    const auto& sp = f.shared_prefix;
    report.config.insert(report.config.end(),
                         {{"groups", static_cast<double>(sp.groups)},
                          {"prompts_per_group", static_cast<double>(sp.prompts_per_group)},
                          {"system_prompt_tokens", static_cast<double>(sp.system_prompt_tokens)},
                          {"question_tokens", static_cast<double>(sp.question_tokens)},
                          {"output_tokens", static_cast<double>(sp.output_tokens)},
                          {"requests_per_rate", static_cast<double>(f.requests_per_rate)}});
  } else {
    report.config.insert(report.config.end(),
                         {{"trace", f.trace_path},
                          {"trace_speedup", f.trace_speedup},
                          {"trace_replicas", static_cast<double>(f.trace_replicas)},
                          {"prefix_multiplier", f.prefix_multiplier}});
  }

  std::vector<simulate::SimLevelExtras> extras;
  for (LevelPlan& plan : plans) {
    simulate::Simulator sim(base, std::move(plan.workload));
    auto result = sim.Run();
    if (!result) return fail(plan.name + ": " + result.error());
    report.gpus = result->gpus;
    const std::size_t n = result->level.requests.size();
    result->level.concurrency = plan.concurrency;
    result->level.rate_per_s = plan.rate;
    extras.push_back(simulate::AppendLevel(std::move(*result), plan.name, &report));
    std::cerr << simulate::RunLine(extras.back(), n) << "\n";
    const std::string calibration =
        simulate::CalibrationLine(report.levels.back(), extras.back());
    if (!calibration.empty()) std::cerr << calibration << "\n";
  }
  if (auto rss = simulate::PeakRssBytes()) {
    std::cerr << "peak RSS " << (*rss >> 20) << " MiB\n";
  }
  std::cout << workload::TerminalTable(report);
  // Said twice, so that neither a reader of the table nor one of the log misses it.
  if (auto note = simulate::FailureNote(report, extras)) {
    std::cout << *note << "\n";
    std::cerr << "kvroute simulate: " << *note << "\n";
  }
  auto wrote = workload::WriteRunFiles(report, f.out_dir);
  if (!wrote) return fail(wrote.error());
  const std::string stem = f.out_dir + "/" + workload::FileStem(report.label);
  if (auto ok = simulate::WriteSimFiles(report, extras, stem); !ok) return fail(ok.error());
  std::cout << "wrote " << stem << ".json, " << stem << "_levels.csv, " << stem << "_requests.csv, "
            << stem << "_workers.csv, " << stem << "_decisions.csv\n";
  if (!f.no_plots) {
    auto plotted = bench::WritePlots(report, f.out_dir);
    if (plotted) {
      std::cout << "plots " << stem << "_*.png / .svg (script " << stem << "_plots.gp)\n";
    } else {
      std::cerr << "kvroute simulate: " << plotted.error() << "\n";
    }
  }
  std::size_t ok = 0;
  for (const auto& level : report.levels) {
    for (const auto& r : level.requests) ok += r.result.ok ? 1 : 0;
  }
  return ok > 0 ? 0 : 1;
}

}  // namespace

void RegisterSimulateCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<SimulateFlags>();
  auto* cmd = app.add_subcommand(
      "simulate",
      "Discrete-event simulation of a whole cluster in virtual time: N engine models (the\n"
      "engine behind `kvroute sim`), the live router's decision path (KV index fed by engine\n"
      "events after --event-delay, predicted-blocks overlay, router-side load, metrics scraped\n"
      "every --scrape-interval with their age, learned rates, the same sched/ policy code),\n"
      "failures, restarts and workers added mid-run. One level per --concurrency (agentic,\n"
      "closed loop) or --rates (shared-prefix, Poisson) entry, or the trace; each on a fresh\n"
      "cluster. Writes the same files as `kvroute bench run` (<label>.json, _levels.csv,\n"
      "_requests.csv, charts) plus <label>_workers.csv (cache hits per worker and tier) and\n"
      "<label>_decisions.csv (router predictions next to outcomes).");
  auto& f = *flags;
  // Fleet.
  cmd->add_option("--workers", f.workers, "Workers of a homogeneous fleet")->capture_default_str();
  cmd->add_option("--profile", f.profile, "Model x hardware profile (name or .yaml path)")
      ->capture_default_str();
  cmd->add_option(
      "--fleet", f.fleet_file,
      "YAML fleet instead of --workers/--profile:\n"
      "  fleet: [{count: 4, profile: P, engine: {max_num_seqs, max_num_batched_tokens,\n"
      "           num_gpu_blocks, num_cpu_blocks, block_size, enable_chunked_prefill,\n"
      "           enable_prefix_caching, cpu_to_gpu_bandwidth_bytes_per_s}}]\n"
      "  changes: [{t: 120s, fail: 3}, {t: 200s, restart: 3}, {t: 300s, add: 8, "
      "profile: P}]");
  cmd->add_option("--fail", f.fail, "A worker dies: t=120s,worker=3 (repeatable)");
  cmd->add_option("--restart", f.restart,
                  "A worker restarts with an empty cache: t=200s,worker=3 (repeatable)");
  cmd->add_option("--add", f.add, "Workers join: t=300s,count=8[,profile=P] (repeatable)");
  cmd->add_option("--block-size", f.block_size, "KV block size, tokens")->capture_default_str();
  cmd->add_option("--max-num-seqs", f.max_num_seqs, "Engine batch size")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "Engine token budget")
      ->capture_default_str();
  cmd->add_option("--num-gpu-blocks", f.num_gpu_blocks,
                  "GPU KV blocks per worker (0: from the profile's memory arithmetic)")
      ->capture_default_str();
  cmd->add_option("--num-cpu-blocks", f.num_cpu_blocks, "CPU-tier KV blocks per worker (0: none)")
      ->capture_default_str();
  cmd->add_option("--max-model-len", f.max_model_len,
                  "Context length of every worker, as `kvroute sim --max-model-len` (0: the "
                  "profile's; Infera's agentic shape needs 131072)")
      ->capture_default_str();
  // Router.
  cmd->add_option("--policy", f.policy,
                  "Built-in policy: round_robin, random, least_load, approx_prefix, dynamo_cost,\n"
                  "llmd_sticky, predicted_latency")
      ->capture_default_str();
  cmd->add_option("--policy-file", f.policy_file, "Policy YAML (sched/registry.h format)");
  cmd->add_option("--router-delay", f.router_delay,
                  "Router time per request between the client's send and the engine seeing it "
                  "(parse, tokenize, route, forward; e.g. 1ms); TTFT counts it")
      ->capture_default_str();
  cmd->add_option("--router-delay-per-1k-tokens", f.router_delay_per_1k,
                  "Router time added per 1,000 prompt tokens (tokenization), e.g. 200us")
      ->capture_default_str();
  cmd->add_option("--event-delay", f.event_delay, "Engine KV event -> index delay (e.g. 20ms)")
      ->capture_default_str();
  cmd->add_option("--scrape-interval", f.scrape_interval, "Engine /metrics scrape interval")
      ->capture_default_str();
  cmd->add_option("--predicted-ttl", f.predicted_ttl, "Lifetime of predict-on-route index entries")
      ->capture_default_str();
  cmd->add_flag("--no-predicted-overlay", f.no_overlay,
                "Route on engine events only (no predicted entries)");
  // Workload.
  cmd->add_option("--workload", f.workload, "agentic | shared-prefix | trace")
      ->capture_default_str()
      ->check(CLI::IsMember({"agentic", "shared-prefix", "trace"}));
  cmd->add_option("--concurrency", f.concurrency, "Agentic: concurrent sessions; a list sweeps")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--sessions", f.agentic.sessions, "Agentic: sessions per level (>= concurrency)")
      ->capture_default_str();
  cmd->add_option("--common-prefix-tokens", f.agentic.common_prefix_tokens,
                  "Agentic: prefix shared by every session")
      ->capture_default_str();
  cmd->add_option("--session-prefix-tokens", f.agentic.session_prefix_tokens,
                  "Agentic: per-session prefix on the first turn")
      ->capture_default_str();
  cmd->add_option("--turns", f.agentic.turns, "Agentic: turns per session")->capture_default_str();
  cmd->add_option("--turn-input-tokens", f.agentic.turn_input_tokens,
                  "Agentic: new user tokens per turn")
      ->capture_default_str();
  cmd->add_option("--think-time", f.think_time,
                  "Agentic: pause after each request (workload::AgenticTurnPause, as `kvroute bench "
                  "--think-time`)")
      ->capture_default_str();
  cmd->add_option("--turn-jitter", f.turn_jitter,
                  "Agentic: each follow-up turn also waits a seeded uniform draw in [0, J) "
                  "(client and network delays a live run has; 0 keeps sessions in lockstep)")
      ->capture_default_str();
  cmd->add_option("--output-tokens", f.output_tokens,
                  "Output tokens per request (agentic default 200, shared-prefix 1000)");
  cmd->add_option("--rates", f.rates, "Shared-prefix: Poisson rates (req/s); a list sweeps")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--requests-per-rate", f.requests_per_rate,
                  "Shared-prefix: requests per rate (0: every prompt once)");
  cmd->add_option("--groups", f.shared_prefix.groups, "Shared-prefix groups")
      ->capture_default_str();
  cmd->add_option("--prompts-per-group", f.shared_prefix.prompts_per_group, "Prompts per group")
      ->capture_default_str();
  cmd->add_option("--system-prompt-tokens", f.shared_prefix.system_prompt_tokens,
                  "Shared system prompt of a group")
      ->capture_default_str();
  cmd->add_option("--question-tokens", f.shared_prefix.question_tokens, "Question per prompt")
      ->capture_default_str();
  cmd->add_option("--trace", f.trace_path, "Trace: Mooncake .jsonl or Azure .csv");
  cmd->add_option("--trace-speedup", f.trace_speedup, "Trace: divide arrival times by this")
      ->capture_default_str();
  cmd->add_option("--trace-replicas", f.trace_replicas,
                  "Trace: copies side by side with disjoint prefixes (scales the rate)")
      ->capture_default_str();
  cmd->add_option("--prefix-multiplier", f.prefix_multiplier,
                  "Trace: scale each 512-token hash block (0.0625: 32-token blocks)")
      ->capture_default_str();
  cmd->add_option("--duration", f.duration, "Virtual time per level after which nothing is sent")
      ->capture_default_str();
  cmd->add_option("--max-requests", f.max_requests, "Requests per level (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--seed", f.seed, "Seed of workloads, outputs and sampling pickers")
      ->capture_default_str();
  // Output.
  cmd->add_option("--label", f.label, "Names this run in outputs")->capture_default_str();
  cmd->add_option("--out", f.out_dir, "Output folder")->capture_default_str();
  cmd->add_option("--itl-target-tps", f.itl_targets, "Infera per-user speed targets (tokens/s)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--ttft-slo", f.ttft_slo, "DistServe TTFT target (s)");
  cmd->add_option("--tpot-slo", f.tpot_slo, "DistServe TPOT target (s)");
  cmd->add_option("--slo-attainment", f.slo_attainment, "DistServe attainment threshold")
      ->capture_default_str();
  cmd->add_flag("--no-progress", f.no_progress, "No progress line on stderr");
  cmd->add_flag("--no-plots", f.no_plots, "Do not run gnuplot");
  cmd->callback([flags, exit_code] { *exit_code = RunSimulate(*flags); });
}

}  // namespace kvroute::app
