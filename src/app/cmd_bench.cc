// kvroute bench: flag parsing around bench::RunBenchmark (the load generator) and the report
// writers. No logic here beyond turning flags into options and options into files.
#include <cstdio>
#include <iostream>
#include <memory>
#include <tuple>

#include "app/commands.h"
#include "app/workload_flags.h"
#include "bench/compare_notes.h"
#include "bench/compare_run.h"
#include "bench/plot.h"
#include "bench/topology_run.h"
#include "workload/report.h"
#include "bench/runner.h"
#include "workload/sweep_stop.h"
#include "common/duration.h"
#include "tokenize/hf_tokenizer.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::app {
namespace {

struct BenchFlags {
  bench::RunnerOptions run;
  std::string label = "kvroute";
  std::string out_dir = "bench-results";
  std::string tokenizer_dir;
  int output_tokens = 0;  // 0: each workload's own default
  // Agentic client pause after each request, model time (as `kvroute simulate`'s flags).
  std::string think_time = "0", turn_jitter = "0";
  int gpus_per_worker = 1;
  int workers = 0;  // 0: one per --metrics-url (at least 1)
  std::vector<double> itl_targets = {30, 50};
  double ttft_slo = 0, tpot_slo = 0, slo_attainment = 0.9;
  double stop_mean_itl_ms = -1;  // < 0: Infera's 40 ms for agentic sweeps, off otherwise
  bool no_progress = false, no_plots = false;
};

// Turns flags into runner options and the report template (tokenizer, config, goodput
// targets). False (after a message) when the tokenizer cannot be loaded.
bool PrepareRun(BenchFlags& f, workload::RunReport& report) {
  if (!f.tokenizer_dir.empty()) {
    auto tok = tokenize::LoadHfTokenizer(f.tokenizer_dir);
    if (!tok) {
      std::cerr << "kvroute bench: --tokenizer " << f.tokenizer_dir << ": " << tok.error() << "\n";
      return false;
    }
    f.run.tokenizer = *tok;
  } else {
    f.run.tokenizer = std::make_shared<tokenize::SimpleTokenizer>();
  }
  if (f.output_tokens > 0) {
    f.run.agentic.output_tokens = static_cast<std::uint32_t>(f.output_tokens);
    f.run.shared_prefix.output_tokens = static_cast<std::uint32_t>(f.output_tokens);
  }
  for (auto [text, out, name] :
       {std::tuple{&f.think_time, &f.run.turn_pause.think_time, "--think-time"},
        {&f.turn_jitter, &f.run.turn_pause.turn_jitter, "--turn-jitter"}}) {
    auto d = ParseDuration(*text);
    if (!d || d->count() < 0) {
      std::cerr << "kvroute bench: " << name << ": " << (d ? "must not be negative" : d.error())
                << "\n";
      return false;
    }
    *out = *d;
  }
  f.run.progress = !f.no_progress;
  if (f.stop_mean_itl_ms < 0) {
    f.stop_mean_itl_ms = f.run.workload == "agentic" ? workload::kInferaStopMeanItlS * 1e3 : 0;
  }
  f.run.stop_mean_itl_s = f.stop_mean_itl_ms / 1e3;

  report.label = f.label;
  const int workers =
      f.workers > 0 ? f.workers : std::max<int>(1, static_cast<int>(f.run.metrics_urls.size()));
  report.gpus = std::max(1, f.gpus_per_worker) * workers;
  report.itl_targets_tps = f.itl_targets;
  if (f.ttft_slo > 0 && f.tpot_slo > 0) {
    report.slo = workload::SloTargets{f.ttft_slo, f.tpot_slo, f.slo_attainment};
  }
  report.config = {
      {"model", f.run.model},
      {"tokenizer", f.tokenizer_dir.empty() ? std::string("simple") : f.tokenizer_dir},
      {"workers", static_cast<double>(workers)},
      {"gpus_per_worker", static_cast<double>(f.gpus_per_worker)},
      {"duration_s", f.run.duration_s},
      {"max_requests", static_cast<double>(f.run.max_requests)},
      {"seed", static_cast<double>(f.run.seed)},
  };
  const auto append = [&](std::vector<workload::ConfigEntry> entries) {
    report.config.insert(report.config.end(), entries.begin(), entries.end());
  };
  if (f.run.workload == "agentic") {
    append(workload::AgenticConfig(f.run.agentic, f.run.turn_pause.think_time,
                                   f.run.turn_pause.turn_jitter, f.run.procedure));
    report.config.push_back({"stop_mean_itl_ms", f.stop_mean_itl_ms});
  } else if (f.run.workload == "shared-prefix") {
    append(workload::SharedPrefixConfig(f.run.shared_prefix,
                                        static_cast<double>(f.run.requests_per_rate)));
  } else if (f.run.workload == "trace") {
    report.config.insert(report.config.end(), {{"trace", f.run.trace_path},
                                               {"trace_speedup", f.run.trace_speedup},
                                               {"prefix_multiplier", f.run.prefix_multiplier}});
  }

  return true;
}

int RunBench(BenchFlags f) {
  workload::RunReport report;
  if (!PrepareRun(f, report)) return 2;
  auto ran = bench::RunBenchmark(f.run, report);
  if (!ran) {
    std::cerr << "kvroute bench: " << ran.error() << "\n";
    return 2;
  }
  std::cout << workload::TerminalTable(report);
  auto wrote = workload::WriteRunFiles(report, f.out_dir);
  if (!wrote) {
    std::cerr << "kvroute bench: " << wrote.error() << "\n";
    return 2;
  }
  const std::string stem = f.out_dir + "/" + workload::FileStem(report.label);
  std::cout << "wrote " << stem << ".json, " << stem << "_levels.csv, " << stem
            << "_requests.csv\n";
  if (!f.no_plots) {
    auto plotted = bench::WritePlots(report, f.out_dir);
    if (plotted) {
      std::cout << "plots " << stem << "_*.png / .svg (script " << stem << "_plots.gp)\n";
    } else {
      std::cerr << "kvroute bench: " << plotted.error() << "\n";  // results are still written
    }
  }
  std::size_t ok = 0;
  for (const auto& level : report.levels) {
    for (const auto& r : level.requests) ok += r.result.ok ? 1 : 0;
  }
  return ok > 0 ? 0 : 1;
}

struct CompareFlags {
  int workers = 4;
  std::string profile;
  // Results at 20, 10 and 5 agree in model time (src/bench/README.md); 10 magnifies proxies less.
  double speedup = 10;
  std::uint32_t max_model_len = 0;
  std::int64_t num_cpu_blocks = 0;
  std::int64_t num_disk_blocks = 0;
  double kv_store_gb = 0;
  std::vector<std::string> routers = bench::kDefaultCompareRouters;
  std::vector<std::string> topologies;  // fleet files or presets; empty: --workers sims
  std::string pd_rule = "cost";
  std::int64_t pd_token_cap = -1;
  std::int64_t pd_non_cached_tokens = -1;
};

// --topology: the same workload on each fleet, per GPU (bench/topology_run.h). Without
// --routers only kvroute:predicted_latency runs (nginx cannot route a P/D fleet).
int RunTopologyCommand(BenchFlags& f, const CompareFlags& c, bench::CompareOptions options,
                       workload::RunReport& report) {
  auto topologies = bench::LoadTopologies(c.topologies);
  if (!topologies) {
    std::cerr << "kvroute bench compare: " << topologies.error() << "\n";
    return 2;
  }
  if (c.routers == bench::kDefaultCompareRouters) options.routers = {"kvroute:predicted_latency"};
  options.cluster.pd_rule = c.pd_rule;
  options.cluster.pd_token_cap = c.pd_token_cap;
  options.cluster.pd_non_cached_tokens = c.pd_non_cached_tokens;
  report.config.push_back({"pd_rule", c.pd_rule});
  if (c.pd_token_cap >= 0) {
    report.config.push_back({"pd_token_cap", static_cast<double>(c.pd_token_cap)});
  }
  if (c.pd_non_cached_tokens >= 0) {
    report.config.push_back({"pd_non_cached_tokens", static_cast<double>(c.pd_non_cached_tokens)});
  }
  auto result = bench::RunTopologyCompare(options, *topologies, f.run, report);
  if (!result) {
    std::cerr << "kvroute bench compare: " << result.error() << "\n";
    return 2;
  }
  std::cout << bench::TopologyTable(result->rows, c.speedup);
  if (auto wrote = bench::WriteTopologyFiles(result->rows, c.speedup, f.out_dir); !wrote) {
    std::cerr << "kvroute bench compare: " << wrote.error() << "\n";
    return 2;
  }
  std::cout << "wrote " << f.out_dir << "/topology.json, per-run " << f.out_dir
            << "/<topology>_<router>.json; logs in " << f.out_dir << "/cluster/\n";
  for (const auto& row : result->rows) {
    if (row.row.ok == 0) return 1;
  }
  return 0;
}

int RunCompareCommand(BenchFlags f, const CompareFlags& c) {
  f.workers = c.workers;
  workload::RunReport report;
  if (!PrepareRun(f, report)) return 2;
  f.run.time_scale = c.speedup;  // the report is in model time (bench/time_base.h)
  report.config.push_back({"speedup", c.speedup});
  if (c.max_model_len > 0) {
    report.config.push_back({"sim_max_model_len", static_cast<double>(c.max_model_len)});
  }
  report.config.push_back({"profile", c.profile.empty() ? std::string("default") : c.profile});
  report.config.push_back({"sim_num_cpu_blocks", static_cast<double>(c.num_cpu_blocks)});
  // Only when set, so reports of runs without them are what they were.
  if (c.num_disk_blocks > 0) {
    report.config.push_back({"sim_num_disk_blocks", static_cast<double>(c.num_disk_blocks)});
  }
  if (c.kv_store_gb > 0) report.config.push_back({"sim_kv_store_gb", c.kv_store_gb});
  bench::CompareOptions options;
  options.cluster.workers = c.workers;
  options.cluster.profile = c.profile;
  options.cluster.seed = f.run.seed;
  options.cluster.speedup = c.speedup;
  options.cluster.max_model_len = c.max_model_len;
  options.cluster.num_cpu_blocks = c.num_cpu_blocks;
  options.cluster.num_disk_blocks = c.num_disk_blocks;
  options.cluster.kv_store_gb = c.kv_store_gb;
  options.routers = c.routers;
  options.out_dir = f.out_dir;
  options.plots = !f.no_plots;
  options.progress = !f.no_progress;
  bench::InstallChildCleanupHandlers();  // Ctrl-C kills the sims and the router, then exits
  if (!c.topologies.empty()) return RunTopologyCommand(f, c, options, report);
  auto result = bench::RunCompare(options, f.run, report);
  if (!result) {
    std::cerr << "kvroute bench compare: " << result.error() << "\n";
    return 2;
  }
  bench::CompareMeta meta;
  meta.speedup = c.speedup;
  meta.workers = c.workers;
  meta.workload = f.run.workload;
  std::cout << bench::CompareTable(result->rows, meta);
  if (const std::string notes = bench::CompareRunNotes(result->runs, f.run); !notes.empty()) {
    std::cout << "\n" << notes;
  }
  std::string plot_error;
  auto wrote = bench::WriteCompareFiles(result->rows, meta, f.out_dir, !f.no_plots, &plot_error);
  if (!wrote) {
    std::cerr << "kvroute bench compare: " << wrote.error() << "\n";
    return 2;
  }
  std::cout << "wrote " << f.out_dir << "/compare.json, " << f.out_dir
            << "/compare.csv, per-router " << f.out_dir << "/<router>.json; logs in " << f.out_dir
            << "/cluster/\n";
  if (!f.no_plots) {
    if (plot_error.empty()) {
      std::cout << "chart " << f.out_dir << "/compare.png / .svg (script compare.gp)\n";
    } else {
      std::cerr << "kvroute bench compare: " << plot_error << "\n";
    }
  }
  for (const auto& row : result->rows) {
    if (row.ok == 0) return 1;
  }
  return 0;
}

// The flags `bench run` and `bench compare` share: the workload flags every load-making command
// has (app/workload_flags.h) and the ones only a live run has.
void AddBenchFlags(CLI::App* cmd, BenchFlags* flags) {
  auto& r = flags->run;
  cmd->add_option("--model", r.model, "Model name (default: first of GET /v1/models)");
  AddWorkloadFlags(cmd, {.workload = &r.workload,
                         .concurrency = &r.concurrency,
                         .agentic = &r.agentic,
                         .think_time = &flags->think_time,
                         .turn_jitter = &flags->turn_jitter,
                         .procedure = &flags->run.procedure,
                         .output_tokens = &flags->output_tokens,
                         .rates = &r.rates,
                         .requests_per_rate = &r.requests_per_rate,
                         .shared_prefix = &r.shared_prefix,
                         .trace_path = &r.trace_path,
                         .trace_speedup = &r.trace_speedup,
                         .prefix_multiplier = &r.prefix_multiplier,
                         .max_requests = &r.max_requests,
                         .seed = &r.seed,
                         .itl_targets = &flags->itl_targets,
                         .ttft_slo = &flags->ttft_slo,
                         .tpot_slo = &flags->tpot_slo,
                         .slo_attainment = &flags->slo_attainment,
                         .no_progress = &flags->no_progress,
                         .no_plots = &flags->no_plots});
  cmd->add_option("--out", flags->out_dir, "Output folder")->capture_default_str();
  cmd->add_option("--tokenizer", flags->tokenizer_dir,
                  "Folder with tokenizer.json (+ tokenizer_config.json) to size prompts; "
                  "default: kvroute's simple tokenizer (what `kvroute sim` uses)");
  cmd->add_option("--duration", r.duration_s,
                  "Wall seconds per level (0: until the workload ends)")
      ->capture_default_str();
  cmd->add_option("--request-timeout", r.request_timeout_s, "Total seconds allowed per request")
      ->capture_default_str();
  cmd->add_option("--gpus-per-worker", flags->gpus_per_worker, "GPUs behind each worker")
      ->capture_default_str();
  cmd->add_option("--stop-mean-itl", flags->stop_mean_itl_ms,
                  "Agentic sweeps: Infera's stop rule, in ms of model time: after a level whose "
                  "mean ITL exceeds it, the higher levels are not run and goodput is taken over "
                  "the levels that ran (default 40 for agentic, as Infera's run_sweep.sh; 0: "
                  "run every level)");
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, int* exit_code) {
  auto* bench = app.add_subcommand(
      "bench",
      "Load generator and reporter: drives an OpenAI-compatible endpoint with streaming\n"
      "requests and reports TTFT, inter-token latency, throughput, prefix-cache hit rate and\n"
      "goodput (Infera per-GPU at a per-user speed; DistServe at TTFT/TPOT SLOs).");
  bench->require_subcommand(1);
  auto flags = std::make_shared<BenchFlags>();
  auto* run = bench->add_subcommand(
      "run",
      "Run one benchmark against --target and write <out>/<label>.json, <label>_levels.csv,\n"
      "<label>_requests.csv and gnuplot charts. Workloads:\n"
      "  agentic        closed loop, N concurrent multi-turn sessions, each turn carrying the\n"
      "                 whole history (Infera kimi_agentic_bench); --concurrency 1,2,4,8 sweeps\n"
      "  shared-prefix  Poisson arrivals per rate of --rates; groups sharing a system prompt\n"
      "  trace          replay a Mooncake JSONL (token-id prompts from hash ids, via\n"
      "                 /v1/completions) or Azure CSV (lengths only, unique prompts)\n"
      "Every level stops by itself: --duration, --max-requests, or the workload's end.");
  auto& r = flags->run;
  run->add_option("--target", r.target_url, "Base URL of the endpoint")->capture_default_str();
  run->add_option("--metrics-url", r.metrics_urls,
                  "Prometheus /metrics of a worker, repeatable (default: <target>/metrics)");
  run->add_option("--label", flags->label, "Names this run (router/setup) in outputs")
      ->capture_default_str();
  run->add_option("--speedup", r.time_scale,
                  "The --speedup of the sims behind --target: measured times are multiplied by "
                  "it so the report (and the ITL/TTFT targets) are in model time")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  run->add_option("--workers", flags->workers,
                  "Workers behind the target (default: number of --metrics-url, at least 1)");
  AddBenchFlags(run, flags.get());
  run->callback([flags, exit_code] { *exit_code = RunBench(*flags); });
  auto compare_flags = std::make_shared<BenchFlags>();
  compare_flags->out_dir = "bench-results/compare";
  auto cflags = std::make_shared<CompareFlags>();
  auto* compare = bench->add_subcommand(
      "compare",
      "Side by side: start --workers local sims (kvroute sim, sped up by --speedup) and run the\n"
      "same workload behind each router of --routers in turn, with fresh (cold) sims for every\n"
      "router: nginx-rr / nginx-lc (real nginx, generated config) and kvroute:<policy preset>.\n"
      "Prints goodput, latency and hit rate per router with ratios against nginx-rr; writes\n"
      "<out>/compare.json, compare.csv, compare.png and every router's own run files.");
  compare->add_option("--workers", cflags->workers, "Local sims behind each router")
      ->capture_default_str()
      ->check(CLI::Range(1, 32));
  compare->add_option("--profile,--sim-profile", cflags->profile,
                      "Engine profile of every sim (name or .yaml path); kvroute serve is told "
                      "it too (its rate seeds and KV bytes per block)");
  compare
      ->add_option("--speedup", cflags->speedup,
                   "Sims run this much faster than real time (proxy overhead is magnified "
                   "by the same factor)")
      ->capture_default_str();
  compare
      ->add_option("--sim-max-model-len", cflags->max_model_len,
                   "Context length of every sim (0: the profile's); the full agentic workload "
                   "needs ~120k")
      ->capture_default_str();
  compare
      ->add_option("--sim-num-cpu-blocks", cflags->num_cpu_blocks,
                   "KV blocks of every sim's host-memory (CPU) tier, as vLLM's CPU offload; "
                   "evicted blocks come back from it at the profile's host-to-GPU bandwidth "
                   "(0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  compare
      ->add_option("--sim-num-disk-blocks", cflags->num_disk_blocks,
                   "KV blocks of every sim's local disk tier, below the CPU tier (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  compare
      ->add_option("--sim-kv-store-gb", cflags->kv_store_gb,
                   "Start a fresh `kvroute store` of this many GB with each router's sims: "
                   "every sim writes through to it and loads from it, and kvroute serve "
                   "indexes its events (nginx does not read them) (0: none)")
      ->capture_default_str()
      ->check(
          [](const std::string& v) -> std::string {
            // CLI::NonNegativeNumber on a double prints the range up to DBL_MAX.
            double gb = -1;
            try {
              gb = std::stod(v);
            } catch (...) {
            }
            return gb >= 0 ? "" : "must be a number >= 0 (GB; 0: no store)";
          },
          "NONNEGATIVE");
  compare
      ->add_option("--routers", cflags->routers,
                   "nginx-rr, nginx-lc, kvroute:<preset> (round_robin, random, least_load, "
                   "approx_prefix, dynamo_cost, llmd_sticky, predicted_latency)")
      ->delimiter(',')
      ->capture_default_str();
  compare
      ->add_option("--topology", cflags->topologies,
                   "Instead of --workers identical sims: run the workload on each fleet, a "
                   "`kvroute simulate --fleet` YAML (roles, profile, tp, gpus, link, engine) or "
                   "the preset 'infera' (1 x TP8 vs 1 x TP4 prefill + 4 x TP2 decode); goodput "
                   "per GPU of each fleet, ratios vs the first; default router "
                   "kvroute:predicted_latency")
      ->delimiter(',');
  compare
      ->add_option("--pd-rule", cflags->pd_rule,
                   "With --topology: kvroute serve's pd.rule on P/D fleets (cost, "
                   "dynamo_token_cap, llmd_non_cached)")
      ->capture_default_str();
  compare
      ->add_option("--pd-token-cap", cflags->pd_token_cap,
                   "With --topology and --pd-rule dynamo_token_cap: pd.token_cap (split above "
                   "this many uncached tokens; default: serve's 5000)");
  compare
      ->add_option("--pd-non-cached-tokens", cflags->pd_non_cached_tokens,
                   "With --topology and --pd-rule llmd_non_cached: pd.non_cached_tokens (split "
                   "at >= this many uncached tokens; default: serve's 0 = never)");
  AddBenchFlags(compare, compare_flags.get());
  compare->callback([compare_flags, cflags, exit_code] {
    *exit_code = RunCompareCommand(*compare_flags, *cflags);
  });
  void RegisterBenchOverheadCommand(CLI::App*, int*);  // defined in cmd_bench_overhead.cc
  RegisterBenchOverheadCommand(bench, exit_code);
  void RegisterBenchTraceCommand(CLI::App*, int*);  // defined in cmd_bench_trace.cc
  RegisterBenchTraceCommand(bench, exit_code);
}

}  // namespace kvroute::app
