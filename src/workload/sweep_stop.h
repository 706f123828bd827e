// Infera's stop rule for a closed-loop concurrency sweep (AMD-AGI/Infera kimi_agentic_bench,
// run_sweep.sh; shared/reference/traces-and-k8s.md §3): the sweep over 1, 2, 4, ... sessions
// stops once a level's MEAN inter-token latency exceeds 40 ms. The level that crossed is
// measured and reported; the higher levels are not run. Goodput is then taken over the levels
// that ran, so it lands where a router really stops meeting the per-user target instead of at
// an arbitrary top of the ladder (and the sweep does not spend time where every router fails).
//
// The mean, not the median: the median decides the target (bench/goodput.h), the mean also
// sees prefill stalls, so a router whose turns recompute long contexts stops earlier.
//
// Thread safety: pure functions over values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "workload/stats.h"

namespace kvroute::workload {

// Infera's threshold, seconds of mean ITL (model time).
inline constexpr double kInferaStopMeanItlS = 0.040;

struct SweepStop {
  std::string after_level;   // the level whose mean ITL crossed, e.g. "c=64"
  double mean_itl_s = 0;     // that level's mean ITL
  std::vector<int> skipped;  // concurrencies of the levels not run
};

// A stop when `threshold_s` > 0 and the level has ITL samples whose mean exceeds it;
// nullopt otherwise (0 or less turns the rule off). `skipped` is left empty for the caller.
std::optional<SweepStop> SweepStopAfter(const std::string& level_name, const Summary& itl,
                                        double threshold_s);

// "sweep stopped after c=64: mean ITL 43.1 ms > 40 ms (Infera's rule); not run: c=128".
std::string SweepStopNote(const SweepStop& stop, double threshold_s);

}  // namespace kvroute::workload
