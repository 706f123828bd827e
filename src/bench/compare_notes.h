// Plain-words notes printed under the compare table (`kvroute demo`, `kvroute bench compare`)
// about the runs behind it, for a reader who did not write the workload: whether the levels
// ended at the time cap, and why the routers' request counts differ.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "workload/report.h"
#include "bench/runner.h"

namespace kvroute::bench {

// `text` re-flowed into lines of at most `width` characters (a longer word gets a line of
// its own), each ending in '\n'. Breaks only at spaces: '\x01' joins words that must stay on
// one line (callers turn it back into a space).
std::string WrapText(std::string_view text, std::size_t width = 100);

// The requests a level of `run` would send if nothing capped it: agentic, sessions (at least
// the concurrency) x turns; nullopt for open-loop workloads (their size follows the rate).
std::optional<std::size_t> UncappedLevelRequests(const RunnerOptions& run, int concurrency);

// For each router's run of `run`'s workload (time_scale and duration_s as run), e.g.:
//   Each level had 50 s of wall time, 500 model seconds at --speedup 10: at that cap it
//   stops starting requests and lets those in flight finish. Every level here ended at the
//   cap, before its 16 sessions had run their 30 turns. The sessions are a closed loop (a
//   session sends its next turn when the previous answer is complete), so in the same time
//   a router that answers sooner serves more requests: kvroute:predicted_latency 318,
//   nginx-rr 254.
// Empty when there is nothing to explain (no cap, and every router sent the same count).
std::string CompareRunNotes(const std::vector<workload::RunReport>& runs, const RunnerOptions& run);

}  // namespace kvroute::bench
