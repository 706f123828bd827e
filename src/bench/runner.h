// The streaming load generator behind `kvroute bench run`: drives an OpenAI-compatible
// endpoint (kvroute sim, kvroute serve, nginx in front of either, a real vLLM) and measures
// every request (bench/runner_request.h) level by level.
//
// Workloads:
//   agentic        closed loop: `concurrency` sessions at a time, each turn carrying the
//                  whole history (the real assistant replies appended); one level per entry
//                  of `concurrency` (a sweep), fresh sessions per level.
//   shared-prefix  open loop: Poisson arrivals at each rate of `rates`.
//   trace          open loop: a Mooncake JSONL (token-id prompts, expanded hash ids) or an
//                  Azure CSV (lengths only: unique token ids) replayed at its arrival times
//                  divided by `trace_speedup`, via /v1/completions.
// Chat workloads use /v1/chat/completions.
//
// Bounded: each level stops launching at `duration_s` (when > 0) or after `max_requests`
// (when > 0), and always after kHardMaxRequests or kHardMaxLevelSeconds; in-flight requests
// then finish within the client's total timeout.
//
// Before and after each level every `metrics_urls` entry is scraped for the engines'
// prefix-cache counters (bench/metrics_scrape.h); the level's hit rate is the ratio of the
// summed deltas.
//
// Thread safety: RunBenchmark runs on the calling thread (one io_context, one thread) and
// may be called from several threads with separate options.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "workload/report.h"
#include "workload/workload.h"
#include "tokenize/tokenizer.h"

namespace kvroute::bench {

struct RunnerOptions {
  std::string target_url = "http://127.0.0.1:8000";  // base URL; /v1/... is appended
  std::string model;                      // empty: the first id of GET /v1/models, else "default"
  std::vector<std::string> metrics_urls;  // empty: <target_url>/metrics
  std::string workload = "agentic";       // agentic | shared-prefix | trace

  // sessions <= 0 (the default here): as many sessions as the level's concurrency.
  workload::AgenticOptions agentic = [] {
    workload::AgenticOptions a;
    a.sessions = 0;
    return a;
  }();
  std::vector<int> concurrency = {1};
  // Agentic: the client's pause after each request, in model time (workload::AgenticTurnPause,
  // the same draws `kvroute simulate --think-time/--turn-jitter` makes); waited in wall time
  // divided by time_scale. Zero (the default): the next request goes out at once.
  workload::TurnPause turn_pause;
  // Agentic: vLLM's multi-turn tool's warm-up step and early stop (workload/workload.h).
  workload::AgenticProcedure procedure;

  workload::SharedPrefixOptions shared_prefix;
  std::vector<double> rates = {1};
  int requests_per_rate = 0;  // 0: duration_s × rate (or every prompt)

  std::string trace_path;
  double trace_speedup = 1.0;
  double prefix_multiplier = 1.0;

  double duration_s = 0;           // per level; 0: until the workload is exhausted
  int max_requests = 0;            // per level; 0: no limit below the hard cap
  double request_timeout_s = 600;  // total limit of one request
  std::uint64_t seed = 1;
  bool progress = true;  // the progress line on stderr
  // The sims' --speedup: every measured duration is multiplied by it when a level ends, so
  // the report is in model time (bench/time_base.h). 1 against real engines.
  double time_scale = 1;
  // Agentic sweeps: Infera's stop rule (bench/sweep_stop.h). After a level whose mean ITL
  // (model time) exceeds this many seconds the higher levels are not run. 0: every level runs.
  double stop_mean_itl_s = 0;

  // Sizes the text of chat workloads and supplies the token palette of trace prompts.
  tokenize::TokenizerPtr tokenizer;
};

inline constexpr int kHardMaxRequests = 1'000'000;
inline constexpr double kHardMaxLevelSeconds = 4 * 3600;

// The wall-clock wait of the agentic client after turn `turn` of session `session` of a level
// whose workload seed is `seed`: workload::AgenticTurnPause in model time, divided by time_scale.
std::chrono::duration<double> AgenticWallPause(const RunnerOptions& options, std::uint64_t seed,
                                               int session, int turn);

// Runs every level in turn (agentic: until the stop rule ends the sweep, recorded in
// `report.sweep_stop`). Fills `report.levels`, `target`, `workload`, `started_at`,
// `stop_mean_itl_s`;
// leaves the caller's label, gpus, targets and config as given. Errors are setup failures
// (unreadable trace, bad URL); request failures are results.
std::expected<void, std::string> RunBenchmark(const RunnerOptions& options, workload::RunReport& report);

// The vocabulary palette for token-id prompts: distinct ids of seeded text (never special
// tokens), so every id is one the tokenizer — and so the engine — accepts.
std::vector<TokenId> VocabularyPalette(const tokenize::Tokenizer& tokenizer, std::uint64_t seed);

}  // namespace kvroute::bench
