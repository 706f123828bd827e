// kvroute simulate: flags → simulate::RunOptions → simulate::RunSimulation (src/simulate/run.h),
// then the report writers shared with `kvroute bench` (same JSON/CSV/plot files) and the
// simulator's own workers/decisions CSVs. No logic here beyond flags → options → files.
#include <iostream>
#include <memory>

#include "app/commands.h"
#include "app/workload_flags.h"
#include "bench/plot.h"
#include "workload/report.h"
#include "simulate/run.h"
#include "simulate/sim_report.h"

namespace kvroute::app {
namespace {

struct SimulateFlags {
  simulate::RunOptions run;
  std::string out_dir = "simulate-results";
  bool no_progress = false, no_plots = false;
};

int RunSimulate(const SimulateFlags& f) {
  auto fail = [](const std::string& msg) {
    std::cerr << "kvroute simulate: " << msg << "\n";
    return 2;
  };
  auto ran = simulate::RunSimulation(f.run, [](const std::string& line) {
    std::cerr << line << "\n";
  });
  if (!ran) return fail(ran.error());
  const workload::RunReport& report = ran->report;
  if (auto rss = simulate::PeakRssBytes()) {
    std::cerr << "peak RSS " << (*rss >> 20) << " MiB\n";
  }
  std::cout << workload::TerminalTable(report);
  // Said twice, so that neither a reader of the table nor one of the log misses it.
  if (auto note = simulate::FailureNote(report, ran->extras)) {
    std::cout << *note << "\n";
    std::cerr << "kvroute simulate: " << *note << "\n";
  }
  auto wrote = workload::WriteRunFiles(report, f.out_dir);
  if (!wrote) return fail(wrote.error());
  const std::string stem = f.out_dir + "/" + workload::FileStem(report.label);
  if (auto ok = simulate::WriteSimFiles(report, ran->extras, stem); !ok) return fail(ok.error());
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
  auto& f = flags->run;
  auto& out = *flags;
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
  cmd->add_option("--num-disk-blocks", f.num_disk_blocks,
                  "Local disk-tier KV blocks per worker, below the CPU tier (0: none)")
      ->capture_default_str();
  cmd->add_flag("--async-tier-loads", f.async_tier_loads,
               "Lower-tier hits load aside while the batch runs (vLLM's offloading connector), "
               "instead of every step waiting for them");
  cmd->add_option("--disk-read-bandwidth", f.disk_read_bandwidth,
                  "Disk tier read bytes/s, as `kvroute sim`'s (0: the engine model's 6.5e9, PCIe 4 "
                  "NVMe)")
      ->capture_default_str();
  cmd->add_option("--kv-store-bandwidth", f.kv_store_bandwidth,
                  "Bytes/s loading from the shared store, as `kvroute sim`'s (0: the engine "
                  "model's 12.5e9, a 100 Gb/s NIC)")
      ->capture_default_str();
  cmd->add_option("--kv-store-latency", f.kv_store_latency_s,
                  "Seconds per store load (negative: the engine model's 1e-3)")
      ->capture_default_str();
  cmd->add_option("--kv-store-gb", f.kv_store_gb,
                  "Capacity in GB of the cluster's shared KV store (`kvroute store`, in virtual "
                  "time): every worker writes through to it and loads from it (0: none)")
      ->capture_default_str();
  cmd->add_option("--kv-store-ttl", f.kv_store_ttl,
                  "Idle time after which the store deletes a block, e.g. 10m (0: never)")
      ->capture_default_str();
  cmd->add_flag("--no-store-leases", f.no_store_leases,
                "Engines do not lease a queued request's store blocks, so the store may evict "
                "what the router credited before the request is scheduled (for comparison)");
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
  cmd->add_option("--pd-rule", f.pd_rule,
                  "Prefill/decode split decision (replaces --policy): cost, dynamo_token_cap,\n"
                  "llmd_non_cached (default: off, or cost when the fleet has a prefill worker)");
  cmd->add_option("--pd-token-cap", f.pd_token_cap,
                  "dynamo_token_cap: split when the decode worker's uncached tokens exceed this")
      ->capture_default_str();
  cmd->add_option("--pd-non-cached-tokens", f.pd_non_cached_tokens,
                  "llmd_non_cached: split at >= this many uncached tokens (0 = never, llm-d's default)")
      ->capture_default_str();
  cmd->add_option("--pd-stall", f.pd_stall,
                  "P/D decision: weight of the stall a local prefill causes the running decodes\n"
                  "(the default policy's 0.1; 1 charges each of them the whole prefill)")
      ->capture_default_str();
  cmd->add_option("--pd-chunk-stall", f.pd_chunk_stall,
                  "P/D decision: weight of the chunk model of that stall (per chunk step, the\n"
                  "chunk's time less the decode step; 1 = as modelled, 0 = off), added to\n"
                  "--pd-stall's term; the measured setting is --pd-stall 0 --pd-chunk-stall 1")
      ->capture_default_str();
  cmd->add_option("--pd-queue-behind", f.pd_queue_behind,
                  "P/D decision: weight of the queue a prefill adds for the requests behind it\n"
                  "on the prefilling worker (1: each waits the whole prefill; 0: off)")
      ->capture_default_str();
  cmd->add_option("--pd-itl-slo", f.pd_itl_slo_s,
                  "P/D decision: drop options whose predicted ITL exceeds this, seconds (0: none)")
      ->capture_default_str();
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
  cmd->add_option("--router-tier-bandwidth-scale", f.router_tier_bandwidth_scale,
                  "The router is told each lower tier loads this many times faster than the "
                  "engine's (mis-seeding; the engine keeps its own)")
      ->capture_default_str();
  cmd->add_flag("--no-tier-learning", f.no_tier_learning,
                "The router keeps its seeded tier bandwidths instead of learning them from "
                "first tokens");
  // Workload.
  AddWorkloadFlags(cmd, {.workload = &f.workload,
                         .concurrency = &f.concurrency,
                         .agentic = &f.agentic,
                         .think_time = &f.think_time,
                         .turn_jitter = &f.turn_jitter,
                         .procedure = &f.procedure,
                         .output_tokens = &f.output_tokens,
                         .rates = &f.rates,
                         .requests_per_rate = &f.requests_per_rate,
                         .shared_prefix = &f.shared_prefix,
                         .trace_path = &f.trace_path,
                         .trace_speedup = &f.trace_speedup,
                         .prefix_multiplier = &f.prefix_multiplier,
                         .max_requests = &f.max_requests,
                         .seed = &f.seed,
                         .itl_targets = &f.itl_targets,
                         .ttft_slo = &f.ttft_slo,
                         .tpot_slo = &f.tpot_slo,
                         .slo_attainment = &f.slo_attainment,
                         .no_progress = &out.no_progress,
                         .no_plots = &out.no_plots});
  cmd->add_option("--trace-replicas", f.trace_replicas,
                  "Trace: copies side by side with disjoint prefixes (scales the rate)")
      ->capture_default_str();
  cmd->add_option("--duration", f.duration, "Virtual time per level after which nothing is sent")
      ->capture_default_str();
  cmd->add_option("--label", f.label, "Names this run in outputs")->capture_default_str();
  cmd->add_option("--out", out.out_dir, "Output folder")->capture_default_str();
  cmd->callback([flags, exit_code] {
    flags->run.progress = !flags->no_progress;
    *exit_code = RunSimulate(*flags);
  });
}

}  // namespace kvroute::app
