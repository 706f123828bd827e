// The workload flags, named and described once for `kvroute bench run|compare` and
// `kvroute simulate`: which workload, its shape, its bounds, the seed and the goodput targets.
// Each command points the flags at its own options struct (bench::RunnerOptions,
// simulate::RunOptions), since the two keep some values in different places; what a flag
// means is the same on both sides. `kvroute demo` runs a fixed workload and has none of them.
// Command-specific flags (bench: --model, --tokenizer, --duration in seconds, --request-timeout;
// simulate: --trace-replicas, --duration as virtual time) stay with their command.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "workload/workload.h"

namespace kvroute::app {

struct WorkloadFlagTargets {
  std::string* workload;  // agentic | shared-prefix | trace
  // Agentic.
  std::vector<int>* concurrency;
  workload::AgenticOptions* agentic;
  std::string* think_time;
  std::string* turn_jitter;
  workload::AgenticProcedure* procedure;  // --warmup-step, --early-stop
  int* output_tokens;  // 0: each workload's default (agentic->output_tokens, shared_prefix's)
  // Shared prefix.
  std::vector<double>* rates;
  int* requests_per_rate;
  workload::SharedPrefixOptions* shared_prefix;
  // Trace.
  std::string* trace_path;
  double* trace_speedup;
  double* prefix_multiplier;
  // Bounds and seed.
  int* max_requests;
  std::uint64_t* seed;
  // Goodput.
  std::vector<double>* itl_targets;
  double* ttft_slo;
  double* tpot_slo;
  double* slo_attainment;
  // Output.
  bool* no_progress;
  bool* no_plots;
};

// Adds the flags to `cmd`. Every pointer must be set; each flag's default is the value the
// target holds when this is called.
void AddWorkloadFlags(CLI::App* cmd, const WorkloadFlagTargets& t);

}  // namespace kvroute::app
