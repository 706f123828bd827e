// RunSimulation: one `kvroute simulate` invocation as a library call — the fleet, policy and
// workload levels its options describe, each level run on a fresh Simulator, collected into
// the bench-format report (workload::RunReport) with the simulator's per-level extras. The
// command (app/cmd_simulate.cc) only maps flags onto RunOptions and writes what comes back.
//
// Thread safety: none; runs on the calling thread.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <string>
#include <vector>

#include "engine/profile.h"
#include "simulate/sim_report.h"
#include "simulate/workload.h"
#include "workload/report.h"
#include "workload/workload.h"

namespace kvroute::simulate {

// The command's options as values; durations are text as written (ParseDuration).
struct RunOptions {
  // Fleet.
  int workers = 8;
  std::string profile = std::string(engine::kDefaultProfileName);
  std::string fleet_file;
  std::vector<std::string> fail, restart, add;
  std::uint32_t block_size = 16, max_num_seqs = 256, max_num_batched_tokens = 8192;
  std::int64_t num_gpu_blocks = 0, num_cpu_blocks = 0;
  std::int64_t num_disk_blocks = 0;  // local disk tier per worker (0: none)
  bool async_tier_loads = false;     // EngineConfig::async_tier_loads
  // Lower-tier speeds (EngineConfig::disk / shared), as `kvroute sim`'s flags: 0 (bandwidth)
  // or negative (latency) keeps the engine model's default.
  double disk_read_bandwidth = 0, kv_store_bandwidth = 0, kv_store_latency_s = -1;
  double kv_store_gb = 0;            // the shared store's capacity in GB (0: no store)
  std::string kv_store_ttl = "0";    // its idle TTL (0: none)
  bool no_store_leases = false;      // SimOptions::store_leases off
  std::uint32_t max_model_len = 0;  // 0: each profile's
  // Router.
  std::string policy = "predicted_latency";
  std::string policy_file;
  std::string event_delay = "0", scrape_interval = "1s", predicted_ttl = "5s";
  std::string router_delay = "0", router_delay_per_1k = "0";
  bool no_overlay = false;
  double router_tier_bandwidth_scale = 1;  // SimOptions (issue 20's mis-seeding); > 0
  bool no_tier_learning = false;           // SimOptions::learn_tier_bandwidths off
  // P/D orchestration (SimOptions::pd): empty = off (the policy places every request);
  // "cost", "dynamo_token_cap" or "llmd_non_cached" (sched/pd_decision.h). Also on, as
  // "cost", for a fleet with a prefill worker when empty.
  std::string pd_rule;
  std::uint64_t pd_token_cap = 5000;
  std::uint64_t pd_non_cached_tokens = 0;
  double pd_itl_slo_s = 0;  // 0: none
  double pd_stall = 0.1;    // sched::SlowdownTerms::stall of the P/D decision
  double pd_chunk_stall = 0;  // sched::PdOptions::chunk_stall (PredictChunkStall's weight)
  double pd_queue_behind = 1;  // sched::PdOptions::queue_behind
  // Workload.
  std::string workload = "agentic";
  workload::AgenticOptions agentic = DefaultAgenticShape();  // fits the default profile
  std::vector<int> concurrency = {8};
  std::string think_time = "0";
  std::string turn_jitter = "0";
  workload::AgenticProcedure procedure;
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
  // Report.
  std::string label = "simulate";
  std::vector<double> itl_targets = {30, 50};
  double ttft_slo = 0, tpot_slo = 0, slo_attainment = 0.9;
  bool progress = true;  // the simulator's progress line on stderr
};

struct RunOutput {
  workload::RunReport report;
  std::vector<SimLevelExtras> extras;  // one per level, report order
};

// Errors: an unusable option (naming the flag), fleet, policy or trace; a level's scheduling
// error. `log` gets each level's run and calibration lines as the level ends (stderr).
std::expected<RunOutput, std::string> RunSimulation(
    RunOptions options, const std::function<void(const std::string&)>& log);

}  // namespace kvroute::simulate
