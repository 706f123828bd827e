// The results of `kvroute bench overhead` (issue 5): what a proxy in front of the model
// servers costs, measured side by side in one run against three kinds of target under the
// same closed-loop load —
//   direct               the client spreads requests over the sims itself (no proxy: baseline)
//   nginx-rr             nginx round robin in front of the same sims
//   kvroute:<policy>     `kvroute serve` with the default policy, and with round_robin, which
//                        separates the cost of routing from the cost of proxying
//
// This file holds the pure parts, unit tested without sockets: one level's summary from its
// samples, the added latency against the direct baseline, the verdict against the issue's
// targets, and the writers (terminal table, JSON, CSV).
//
// Method of "added latency": target − direct at the same percentile and concurrency, each
// percentile taken over its own run (NOT paired per-request differences: the two runs are
// different requests). The latency is TTFT for streamed requests, E2E otherwise.
//
// "Chunks" are the SSE data events a streamed response carried (every `data:` event except
// `[DONE]`): the unit of work a proxy relays one by one.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "workload/stats.h"

namespace kvroute::bench {

// One request of a level.
struct OverheadSample {
  double start_s = 0;    // when it was sent, on the level's clock
  double latency_s = 0;  // TTFT (stream) or E2E (non-stream)
  double e2e_s = 0;      // send to last byte
  std::uint32_t chunks = 0;
  std::string error_kind;  // empty: ok; else a ClientError kind name, "http_5xx", "stream"...
};

// One target at one concurrency.
struct OverheadLevel {
  std::string target;  // "direct", "nginx-rr", "kvroute:<policy>"
  int concurrency = 0;
  std::size_t ok = 0;
  std::size_t errors = 0;
  std::map<std::string, std::size_t> error_kinds;
  double elapsed_s = 0;      // first send to last completion of the recorded requests
  std::uint64_t chunks = 0;  // of ok requests
  workload::Summary latency;           // of ok requests, seconds
  workload::Summary e2e;               // of ok requests, seconds

  // CPU seconds used while the level ran (warm-up included), read from /proc: the target's
  // proxy (0 for direct), the sims together, the load generator; -1 when unknown. On a
  // shared machine CPU per request is steadier than rates, which depend on what else runs.
  double proxy_cpu_s = -1, sims_cpu_s = -1, client_cpu_s = -1;
  int all_requests = 0;  // requests the CPU was spent on: warm-up + recorded
  // Seconds the proxy's threads were runnable but waited for a CPU while the level ran
  // (/proc/<pid>/task/*/schedstat; 0 for direct, -1 unknown). Large next to proxy_cpu_s: the
  // proxy was starved by other processes on its CPUs, so its rate shows its scheduler share.
  double proxy_runq_s = -1;

  double RequestsPerS() const;  // ok / elapsed (0 when nothing was measured)
  double ChunksPerS() const;    // chunks / elapsed
  // CPU microseconds per request of the proxy / of proxy + sims + client; -1 unknown.
  double ProxyCpuUsPerRequest() const;
  double TotalCpuUsPerRequest() const;
  // Run-queue wait microseconds per request of the proxy; -1 unknown.
  double ProxyRunqUsPerRequest() const;
};

// Summarises the samples of one level. `elapsed_s` is the level's wall time; when <= 0 it is
// taken from the samples (first start to last end).
OverheadLevel SummarizeOverheadLevel(std::string target, int concurrency,
                                     std::span<const OverheadSample> samples, double elapsed_s = 0);

// target − direct at p50/p90/p99 (seconds); nullopt when either has no ok request.
struct AddedLatency {
  double p50 = 0, p90 = 0, p99 = 0;
};
std::optional<AddedLatency> AddedVsDirect(const OverheadLevel& target, const OverheadLevel& direct);

// The targets.
inline constexpr double kTargetThroughputRatio = 0.8;  // kvroute req/s ≥ 0.8 × nginx req/s
inline constexpr double kTargetAddedP99S = 0.001;      // ≤ 1 ms added at p99

struct OverheadRunConfig {
  std::string label = "overhead";
  int workers = 0;
  std::string profile;
  double speedup = 0;
  bool stream = true;
  std::uint32_t prompt_tokens = 0;
  std::uint32_t output_tokens = 0;
  int requests = 0;         // per level (recorded, after the warm-up)
  int warmup_requests = 0;  // per level, not recorded
  double duration_s = 0;    // cap per level
  std::string policy;       // kvroute's default policy
  std::string pinning;      // how processes were placed on CPUs ("" none)
  int router_lanes = 0;     // kvroute serve lanes = nginx worker processes (0 unknown)
  std::string started_at;   // ISO 8601 UTC
  double load_before = -1;  // 1-minute load average when the run started (-1 unknown)
  double load_after = -1;
  int cpus = 0;
};

struct OverheadReport {
  OverheadRunConfig config;
  std::vector<OverheadLevel> levels;  // every (concurrency, target), in run order
};

// The verdict of one kvroute target at one concurrency against nginx-rr and direct.
struct OverheadVerdict {
  std::string target;
  int concurrency = 0;
  std::optional<double> throughput_ratio;  // kvroute req/s ÷ nginx req/s
  std::optional<double> added_p99_s;       // vs direct
  bool throughput_met = false;
  bool latency_met = false;
};
std::vector<OverheadVerdict> OverheadVerdicts(const OverheadReport& report);

// The terminal table: one row per level with req/s, chunks/s, latency p50/p90/p99, added
// latency vs direct, req/s ratio vs nginx-rr, CPU per request, errors; then the verdicts.
std::string OverheadTable(const OverheadReport& report);
// One JSON document: config, levels (with added latency and ratios), verdicts.
std::string OverheadJson(const OverheadReport& report);
// One CSV row per level, latencies in milliseconds.
std::string OverheadCsv(const OverheadReport& report);

}  // namespace kvroute::bench
