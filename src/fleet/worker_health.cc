#include "fleet/worker_health.h"

#include <algorithm>

namespace kvroute::fleet {

const char* HealthStateName(HealthState state) {
  switch (state) {
    case HealthState::kHealthy:
      return "healthy";
    case HealthState::kEjected:
      return "ejected";
    case HealthState::kProbing:
      return "probing";
    case HealthState::kRemoved:
      return "removed";
  }
  return "unknown";
}

WorkerHealth::WorkerHealth(HealthOptions options) : options_(options) {}

// Applies the passage of time: an ejection whose backoff has elapsed becomes a probe.
void WorkerHealth::Advance(Entry& e, Nanos now) {
  if (e.status.state == HealthState::kEjected && now >= e.status.ejected_until) {
    e.status.state = HealthState::kProbing;
  }
}

void WorkerHealth::Add(WorkerId worker, Nanos now) {
  std::lock_guard lock(mu_);
  version_.fetch_add(1, std::memory_order_acq_rel);
  Entry e;
  e.healthy_since = now;
  workers_[worker] = e;
}

void WorkerHealth::Remove(WorkerId worker) {
  std::lock_guard lock(mu_);
  version_.fetch_add(1, std::memory_order_acq_rel);
  auto it = workers_.find(worker);
  if (it != workers_.end()) it->second.status.state = HealthState::kRemoved;
}

void WorkerHealth::SetDraining(WorkerId worker, bool draining) {
  std::lock_guard lock(mu_);
  version_.fetch_add(1, std::memory_order_acq_rel);
  auto it = workers_.find(worker);
  if (it != workers_.end()) it->second.status.draining = draining;
}

void WorkerHealth::SetDown(WorkerId worker, bool down) {
  std::lock_guard lock(mu_);
  version_.fetch_add(1, std::memory_order_acq_rel);
  auto it = workers_.find(worker);
  if (it != workers_.end()) it->second.status.down = down;
}

void WorkerHealth::OnSuccess(WorkerId worker, Nanos now) {
  std::lock_guard lock(mu_);
  version_.fetch_add(1, std::memory_order_acq_rel);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  Entry& e = it->second;
  Advance(e, now);
  switch (e.status.state) {
    case HealthState::kRemoved:
    case HealthState::kEjected:  // a late success of a request sent before the ejection
      return;
    case HealthState::kProbing:
      e.status.state = HealthState::kHealthy;
      e.healthy_since = now;
      break;
    case HealthState::kHealthy:
      break;
  }
  e.status.consecutive_failures = 0;
}

void WorkerHealth::OnFailure(WorkerId worker, Nanos now) {
  std::lock_guard lock(mu_);
  version_.fetch_add(1, std::memory_order_acq_rel);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  Entry& e = it->second;
  Advance(e, now);
  HealthStatus& s = e.status;
  if (s.state == HealthState::kRemoved || s.state == HealthState::kEjected) return;
  if (s.state == HealthState::kHealthy) {
    // A worker that stayed healthy long enough starts again from the base backoff.
    if (now - e.healthy_since >= options_.max_backoff) s.ejections = 0;
    if (++s.consecutive_failures < std::max<std::uint32_t>(options_.failures_to_eject, 1)) return;
  }
  // Eject: N failures while healthy, or one failed probe.
  Nanos backoff = options_.base_backoff;
  for (std::uint32_t i = 0; i < s.ejections && backoff < options_.max_backoff; ++i) backoff *= 2;
  backoff = std::min(backoff, options_.max_backoff);
  s.state = HealthState::kEjected;
  s.ejected_until = now + backoff;
  s.ejections += 1;
  s.total_ejections += 1;
  s.consecutive_failures = 0;
}

HealthStatus WorkerHealth::Status(WorkerId worker, Nanos now) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return HealthStatus{.state = HealthState::kRemoved};
  Entry e = it->second;
  Advance(e, now);
  return e.status;
}

std::vector<WorkerId> WorkerHealth::ProbeTargets(Nanos now) const {
  std::lock_guard lock(mu_);
  std::vector<WorkerId> out;
  for (const auto& [id, entry] : workers_) {
    Entry e = entry;
    Advance(e, now);
    if (e.status.down) continue;
    if (e.status.state == HealthState::kHealthy || e.status.state == HealthState::kProbing) {
      out.push_back(id);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kvroute::fleet
