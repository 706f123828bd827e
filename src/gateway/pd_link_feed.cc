#include "gateway/pd_link_feed.h"

#include <algorithm>
#include <limits>

#include "engine/kv_transfer.h"
#include "fleet/router_state.h"

namespace kvroute::gateway {

PullLinkFeed::Pull PullLinkFeed::PullInto(WorkerId decode_worker) const {
  std::uint32_t decode_tp = 0;
  double speedup = 1;
  std::uint32_t prefill_tp = std::numeric_limits<std::uint32_t>::max();
  for (const fleet::WorkerInfo& w : state_->List()) {
    if (w.id == decode_worker) {
      decode_tp = w.spec.tp;
      speedup = w.spec.profile_speedup;
    } else if (w.spec.role != sched::Role::kDecode) {
      prefill_tp = std::min(prefill_tp, w.spec.tp);
    }
  }
  if (decode_tp == 0) return {};
  if (prefill_tp == std::numeric_limits<std::uint32_t>::max()) prefill_tp = decode_tp;
  return {.lanes = engine::KvTransferLanes(prefill_tp, decode_tp), .speedup = speedup};
}

bool PullLinkFeed::OnScrape(WorkerId worker, const fleet::EngineMetrics& m) {
  if (!m.kv_pull_seconds_sum || !m.kv_pull_count || !m.kv_pull_bytes_sum) return false;
  const Totals now{*m.kv_pull_seconds_sum, *m.kv_pull_count, *m.kv_pull_bytes_sum};
  Totals before;
  {
    std::lock_guard lock(mu_);
    auto [it, first] = last_.try_emplace(worker, now);
    if (first) return false;  // the baseline: pulls before it are not timed from here
    before = it->second;
    it->second = now;
  }
  const double n = now.count - before.count;
  const double bytes = now.bytes - before.bytes;
  const double seconds = now.seconds - before.seconds;
  // A restart (counters back to zero) or nothing pulled since the last scrape.
  if (n <= 0 || bytes <= 0 || seconds <= 0) return false;
  const Pull pull = PullInto(worker);
  if (pull.lanes == 0 || !(pull.speedup > 0)) return false;
  if (!state_->OnKvTransfer(worker, bytes / n, pull.lanes, seconds / n / pull.speedup)) {
    return false;
  }
  std::lock_guard lock(mu_);
  ++samples_;
  return true;
}

std::uint64_t PullLinkFeed::samples() const {
  std::lock_guard lock(mu_);
  return samples_;
}

}  // namespace kvroute::gateway
