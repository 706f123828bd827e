// ParityWatch: what kvroute knows of each worker's parity with its block keys, as a warning
// in the log (once per change) and the gauge kvroute_parity_mismatch{worker, setting}.
// Fed by the start probe (parity_probe.h), by the maintenance loop's continuous checks (the
// scraped block size; ParityChecker's per-worker findings) — every setting of
// kParitySettings starts at 0 for every worker the probe covers.
//
// Ownership: borrows the metrics. Thread safety: one mutex; any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/types.h"
#include "gateway/parity_probe.h"
#include "gateway/router_metrics.h"

namespace kvroute::gateway {

class ParityWatch {
 public:
  explicit ParityWatch(RouterMetrics* metrics) : metrics_(metrics) {}

  // Runs ProbeWorkers over `targets`, logs each finding as a warning and sets the gauges
  // (0 for every setting of every target first). Returns the findings. Used at Start for
  // every worker and at run time for each worker that joins (parity_probe_queue.h).
  std::vector<ProbeFinding> RunStartProbe(const std::vector<ParityTarget>& targets,
                                          const ParityProbeDeps& deps);
  // Whether a start probe has covered (or is covering) `worker`.
  bool Probed(WorkerId worker) const;

  // The worker's scraped block size against kvroute's: logs and flips the gauge on change.
  void WatchBlockSize(WorkerId worker, std::string_view name, std::uint32_t scraped,
                      std::uint32_t ours);

  // A mismatch found elsewhere (ParityChecker): set, logged by the caller.
  void Set(WorkerId worker, std::string_view name, std::string_view setting, bool mismatch);
  bool Has(WorkerId worker, std::string_view setting) const;

 private:
  RouterMetrics* const metrics_;
  mutable std::mutex mu_;
  std::set<std::pair<WorkerId, std::string>> mismatches_;  // guarded by mu_
  std::set<WorkerId> probed_;                              // guarded by mu_
};

}  // namespace kvroute::gateway
