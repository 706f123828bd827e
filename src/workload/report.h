// The results of one `kvroute bench run` and their outputs: a JSON document (one file per
// run, self-describing, so `bench compare` can merge several runs by label), a CSV row per
// level, a CSV row per request, and a terminal table.
//
// JSON layout (schema "kvroute.bench.run/1"):
//   {"schema", "label", "target", "workload", "started_at", "gpus", "config": {...},
//    "time_base": {"speedup", "note"}   (every time and rate below is model time),
//    "levels": [{"name", "concurrency"|"rate_per_s", "duration_s",
//                "requests": {"sent", "ok", "failed", "errors": {kind: n}},
//                "ttft_s"|"itl_s"|"e2e_s"|"tpot_s": {count, mean, min, max, p50, p90, p99},
//                "throughput": {"input_tokens_per_s", "output_tokens_per_s", "requests_per_s"},
//                "cache": {"hit_rate", "external_hit_rate", "client_cached_fraction"},
//                "slo_attainment"}],
//    "sweep": {"stop_mean_itl_s" (null: rule off), "stopped_after" (null: every level ran),
//              "mean_itl_s", "skipped": [concurrency...]},
//    "goodput": {"infera": [{target_tokens_per_s_per_user, tokens_per_s_per_gpu,
//                            at_concurrency, points}], "distserve": {...}}}
// Absent values are null, never a made-up 0.
//
// Thread safety: pure functions over values.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "workload/goodput.h"
#include "workload/stats.h"
#include "workload/sweep_stop.h"
#include "workload/workload.h"

namespace kvroute::workload {

// One request with where it belongs in the workload (for the per-request CSV and checks such
// as "cached tokens grow over the turns of a session").
struct RequestRecord {
  RequestResult result;
  int session = -1;  // agentic: session index; shared-prefix: group; trace: -1
  int turn = -1;     // agentic: turn index; otherwise the request's index in the level
  // Sent in the warm-up step (AgenticProcedure): in the requests file, in no summary,
  // goodput or duration.
  bool warmup = false;
};

struct LevelResult {
  std::string name;       // "c=4", "rate=2", "trace"
  int concurrency = 0;    // closed-loop levels; 0 for open loop
  double rate_per_s = 0;  // open-loop levels (the offered rate); 0 for closed loop
  double duration_s = 0;  // first send to last completion
  std::vector<RequestRecord> requests;
  std::optional<double> hit_rate;           // engine prefix-cache hit rate over the level
  std::optional<double> external_hit_rate;  // a lower cache tier, when the engines export it
  // Prompt tokens served from each tier (GPU, CPU, DISK, SHARED) / prompt tokens queried,
  // when the engines have a disk tier or a shared store (JSON "cache.by_tier"; absent else).
  std::optional<std::array<double, 4>> tier_hit_rate;
};

using ConfigValue = std::variant<double, std::string>;
using ConfigEntry = std::pair<std::string, ConfigValue>;

// The report's config entries of a generated workload: the same keys, in the same order, for
// `kvroute bench` and `kvroute simulate`.
std::vector<ConfigEntry> AgenticConfig(const AgenticOptions& a, Nanos think_time,
                                       Nanos turn_jitter, const AgenticProcedure& procedure = {});
std::vector<ConfigEntry> SharedPrefixConfig(const SharedPrefixOptions& sp,
                                            double requests_per_rate);

struct RunReport {
  std::string label;       // names the router / setup in merged comparisons
  std::string target;      // base URL driven
  std::string workload;    // agentic | shared-prefix | trace
  std::string started_at;  // ISO-8601 UTC
  int gpus = 1;            // gpus per worker × workers, for per-GPU goodput
  double time_scale = 1;   // the sims' speedup; every time in `levels` is model time (time_base.h)
  std::vector<std::pair<std::string, ConfigValue>> config;  // the flags that shaped the run
  std::vector<double> itl_targets_tps = {30, 50};           // Infera per-user speed targets
  std::optional<SloTargets> slo;                            // DistServe targets, when given
  std::vector<LevelResult> levels;
  double stop_mean_itl_s = 0;           // the sweep's stop rule (bench/sweep_stop.h); 0: off
  std::optional<SweepStop> sweep_stop;  // set when the rule ended the sweep early
};

// Per-level aggregates, computed once and shared by every output.
struct LevelSummary {
  std::size_t sent = 0, ok = 0, failed = 0;
  std::map<std::string, std::size_t> errors;  // kind → count
  Summary ttft, itl, e2e, tpot;               // over ok requests (itl: every gap)
  double input_tokens_per_s = 0, output_tokens_per_s = 0, requests_per_s = 0;
  std::uint64_t input_tokens = 0, output_tokens = 0, cached_tokens = 0;
  std::optional<double> client_cached_fraction;  // Σ cached / Σ prompt tokens (from usage)
  std::optional<double> slo_attainment;
};

LevelSummary SummarizeLevel(const LevelResult& level, const std::optional<SloTargets>& slo);

// Goodput both ways over the run's levels: Infera over closed-loop levels (one entry per
// target), DistServe over open-loop levels when `slo` is set.
std::vector<InferaGoodput> InferaGoodputs(const RunReport& run);
std::optional<DistServeGoodput> DistServeGoodputOf(const RunReport& run);

std::string RunJson(const RunReport& run);
std::string LevelsCsv(const RunReport& run);
std::string RequestsCsv(const RunReport& run);
std::string TerminalTable(const RunReport& run);

// A label made safe for file names: [A-Za-z0-9._-], others become '_'; "run" when empty.
std::string FileStem(const std::string& label);

// Writes <dir>/<stem>.json, <stem>_levels.csv and <stem>_requests.csv (creating dir).
std::expected<void, std::string> WriteRunFiles(const RunReport& run, const std::string& dir);

}  // namespace kvroute::workload
