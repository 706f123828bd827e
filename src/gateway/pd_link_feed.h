// PullLinkFeed: teaches each decode worker's KV link (fleet::LinkLearner, through
// RouterState::OnKvTransfer) from the pulls its engine reports in /metrics — vLLM's NIXL
// decode-side histograms `vllm:nixl_xfer_time_seconds` and `vllm:nixl_bytes_transferred`
// (`kvroute sim` exports the same). serve sees no single pull's time (the decode leg's first
// byte also waits for D's queue and the recomputed token), so it learns from what finished
// between two scrapes of the worker: n = Δcount pulls, Δbytes, Δseconds (their summed
// durations) → one sample of their mean pull, Δbytes / n over `lanes` in Δseconds / n.
// lanes = engine::KvTransferLanes(the smallest TP of the fleet's prefill-capable workers,
// the decode worker's TP), the engine's rule for a pull. The seconds are divided by the
// worker's profile_speedup: a sped-up `kvroute sim` reports its engine's model time, and the
// router learns every rate in wall time (its seeds are scaled the same way; 1 for an engine).
//
// A counter that went backwards (the engine restarted) restarts the baseline; a scrape
// without the histograms (no connector, or another engine) teaches nothing.
//
// Thread safety: OnScrape from any thread (the scraper's); one internal mutex.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "common/types.h"
#include "fleet/scraped_metrics.h"

namespace kvroute::fleet {
class RouterState;
}

namespace kvroute::gateway {

class PullLinkFeed {
 public:
  explicit PullLinkFeed(fleet::RouterState* state) : state_(state) {}

  // One successful scrape of `worker`. Returns true when it taught the link a sample.
  bool OnScrape(WorkerId worker, const fleet::EngineMetrics& metrics);

  std::uint64_t samples() const;

 private:
  struct Totals {
    double seconds = 0;
    double count = 0;
    double bytes = 0;
  };
  struct Pull {
    std::uint32_t lanes = 0;  // 0: the worker is unknown
    double speedup = 1;       // the decode worker's profile_speedup
  };
  Pull PullInto(WorkerId decode_worker) const;

  fleet::RouterState* const state_;
  mutable std::mutex mu_;
  std::map<WorkerId, Totals> last_;  // guarded by mu_
  std::uint64_t samples_ = 0;        // guarded by mu_
};

}  // namespace kvroute::gateway
