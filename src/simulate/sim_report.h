// Outputs of `kvroute simulate`. The run itself is reported in exactly the format of
// `kvroute bench run` (bench/report.h: the run JSON, levels CSV, per-request CSV, gnuplot
// charts), so a simulated run and a live one compare line by line with `kvroute bench
// compare`. The simulator adds two files of its own:
//   <stem>_workers.csv    per level and worker: profile, routed requests, restarts, prefix
//                         cache queries/hits (tokens, GPU + CPU tier), CPU-tier hits,
//                         preemptions — the cache hit rate per worker and tier
//   <stem>_decisions.csv  per request: the worker chosen, what the router predicted (cached
//                         tokens, TTFT; on P/D runs also split or not, the prefilling worker,
//                         its predicted prefill tokens and the predicted ITL) and what
//                         happened (TTFT, the request's median inter-token gap) — the
//                         fidelity hooks
// and a run line per level (wall and virtual seconds, events, engine steps, peak RSS).
//
// Thread safety: pure functions, except PeakRssBytes (reads /proc/self/status).
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "workload/report.h"
#include "simulate/simulator.h"

namespace kvroute::simulate {

// What the simulator knows of a level beyond workload::LevelResult.
struct SimLevelExtras {
  std::string level;  // the level's name
  std::vector<DecisionRecord> decisions;
  std::vector<WorkerReport> workers;
  double virtual_s = 0, wall_s = 0;
  std::uint64_t events = 0, steps = 0;
  std::uint64_t rejected = 0;   // SimResult::rejected
  std::string first_rejection;  // SimResult::first_rejection
  std::vector<PdRecord> pd;     // SimResult::pd (P/D runs only)
  std::uint64_t pins_expired = 0;
  std::uint64_t shared_credited_blocks = 0;  // SimResult's shared-store credit
  std::uint64_t shared_missing_blocks = 0;
  std::uint64_t store_leases = 0;  // SimResult's store lease counters
  std::uint64_t store_leases_expired = 0;
  std::uint64_t store_refused_full = 0;
};

// Moves `result`'s level into `report` (named `name`) and returns the rest.
SimLevelExtras AppendLevel(SimResult result, const std::string& name, workload::RunReport* report);

std::string WorkersCsv(const std::vector<SimLevelExtras>& levels);
// `report` supplies the actual outcome of each decision (same level order as `levels`).
std::string DecisionsCsv(const workload::RunReport& report, const std::vector<SimLevelExtras>& levels);

// Writes <stem>_workers.csv and <stem>_decisions.csv; `stem` is "<dir>/<file stem>" as
// workload::WriteRunFiles names its files (the folder must exist).
std::expected<void, std::string> WriteSimFiles(const workload::RunReport& report,
                                               const std::vector<SimLevelExtras>& levels,
                                               const std::string& stem);

// "level c=8: 1234 requests, virtual 812.3 s, wall 4.1 s (198x), 2.1M events, 310k steps"
std::string RunLine(const SimLevelExtras& level, std::size_t requests);

// "level c=24: tier bandwidths learned/seed CPU 1.02 (0.97-1.05, 311 samples), DISK ...":
// per lower tier with a seed, the geometric mean (and range) over workers of the router's
// learned bandwidth ÷ its seed at the level's end, and the samples; empty without a seeded
// lower tier (issue 20's learner, fleet::TierLoadLearner).
std::string TierLearningLine(const std::string& level, const fleet::RouterState& router);

// "TTFT measured / predicted on the chosen worker: p10 0.8, p50 1.0, p90 1.3 (4,812 requests)"
// over the served requests of `level` (the report's level of the same name) that had a
// prediction; empty when none had. The router's calibration at a glance (issue 15).
std::string CalibrationLine(const workload::LevelResult& level, const SimLevelExtras& extras);

// P/D runs (issue 19): "level c=16: P/D split 412 of 480 requests; transfer per split
// request: 35.1 MB p50 / 210.4 MB p99, 1.9 ms p50 / 9.8 ms p99, 1.2 % p50 / 6.0 % p99 of its
// TTFT; pins expired 0" over the served requests; empty for a run without P/D.
std::string PdLine(const workload::LevelResult& level, const SimLevelExtras& extras);

// Runs with a shared store: "level c=16: shared-store credit 12345 blocks on the chosen
// workers, 3 not found at scheduling (0.024 %, an upper bound)"; empty when nothing was
// credited from the store.
std::string SharedCreditLine(const SimLevelExtras& extras);

// What `kvroute simulate` says about failed requests, on stderr and under its table; nullopt
// when none failed. Most of the run failed: a WARNING line naming the error kinds, the
// engines' reason for refusing requests and what to change, e.g.
//   WARNING: 216 of 240 requests failed (http_4xx 216): the engines refused 216 requests
//   longer than max_model_len 40960 (first: "prompt (30000 tokens) + ..."). Shorten ...
// Some failed (a failure schedule, a few long trace requests): the same as a "note:" line.
std::optional<std::string> FailureNote(const workload::RunReport& report,
                                       const std::vector<SimLevelExtras>& levels);

// Peak resident set size of this process (VmHWM), bytes; nullopt where unavailable.
std::optional<std::uint64_t> PeakRssBytes();

}  // namespace kvroute::simulate
