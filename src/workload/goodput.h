// Goodput, computed both ways the issue asks for (docs/benchmarks.md explains them):
//
// 1. Infera's (AMD-AGI/Infera kimi_agentic_bench): a closed-loop sweep over concurrency. A
//    level meets a per-user speed target T tokens/s when its median inter-token latency is at
//    most 1/T seconds. Goodput = total (input + output) tokens/s per GPU measured at the
//    highest concurrency that meets the target; none if no level does.
// 2. DistServe's (OSDI'24): a sweep over request rate. A request attains its SLO when its TTFT
//    and its TPOT (mean time per output token after the first) are both within target; failed
//    requests do not attain. Goodput = the highest rate whose attainment is at least 90%
//    (configurable); none if no rate does.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvroute::workload {

// What the streaming client measured for one request. Times in seconds.
struct RequestResult {
  bool ok = false;
  std::string error_kind;  // empty when ok: "http_4xx", "http_5xx", "connect", "timeout", "stream"
  double start_s = 0;      // send time, relative to the run's start
  double ttft_s = 0;       // first content token
  double e2e_s = 0;        // last byte
  std::vector<double> itl_s;  // every gap between consecutive content chunks
  std::uint32_t prompt_tokens = 0;
  std::uint32_t output_tokens = 0;
  std::uint32_t cached_tokens = 0;  // usage.prompt_tokens_details.cached_tokens
};

// Mean time per output token after the first; 0 for a single-token output.
double Tpot(const RequestResult& r);

struct ConcurrencyLevel {
  int concurrency = 0;
  double duration_s = 0;          // wall time of the measured window
  std::uint64_t total_tokens = 0; // input + output tokens of requests completed in the window
  double itl_p50_s = 0;           // median of every inter-token gap in the window
};

struct InferaPoint {
  int concurrency = 0;
  double tokens_per_s_per_gpu = 0;
  double itl_p50_s = 0;
  bool meets_target = false;
};

struct InferaGoodput {
  std::optional<double> tokens_per_s_per_gpu;
  std::optional<int> at_concurrency;
  std::vector<InferaPoint> points;  // sorted by concurrency
};

// REQUIRES: target_tokens_per_s_per_user > 0, num_gpus > 0.
InferaGoodput ComputeInferaGoodput(std::span<const ConcurrencyLevel> levels,
                                   double target_tokens_per_s_per_user, int num_gpus);

struct SloTargets {
  double ttft_s = 0;
  double tpot_s = 0;
  double min_attainment = 0.9;
};

// Fraction of requests that are ok and meet both targets; nullopt for no requests.
std::optional<double> SloAttainment(std::span<const RequestResult> requests, const SloTargets& slo);

struct RateLevel {
  double rate_per_s = 0;
  std::vector<RequestResult> requests;
};

struct DistServePoint {
  double rate_per_s = 0;
  double attainment = 0;
};

struct DistServeGoodput {
  std::optional<double> rate_per_s;
  std::optional<double> rate_per_s_per_gpu;
  std::vector<DistServePoint> points;  // sorted by rate
};

DistServeGoodput ComputeDistServeGoodput(std::span<const RateLevel> levels, const SloTargets& slo,
                                         int num_gpus);

// Prefix-cache hit rate from two scrapes of vLLM's counters (tokens): hits / queries over the
// interval; nullopt when no query happened or a counter went backwards (engine restart).
std::optional<double> HitRate(double queries_before, double queries_after, double hits_before,
                              double hits_after);

}  // namespace kvroute::workload
