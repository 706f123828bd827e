#include "extproc/epp_fairness.h"

namespace kvroute::extproc {

FairShareVerdict FairShareLedger::Admit(int priority, const std::string& fairness_id, bool saturated) {
  std::lock_guard lock(mu_);
  auto& level = in_flight_[priority];
  FairShareVerdict v;
  for (const auto& [id, count] : level) {
    v.in_flight += count;
    ++v.ids;
    if (id == fairness_id) v.held = count;
  }
  if (v.held == 0) ++v.ids;  // the asking id takes part even while it holds nothing
  v.share = static_cast<double>(v.in_flight) / v.ids;
  v.over = saturated && v.ids >= 2 && v.held > v.share;
  if (!v.over) ++level[fairness_id];
  if (level.empty()) in_flight_.erase(priority);
  return v;
}

void FairShareLedger::Release(int priority, const std::string& fairness_id) {
  std::lock_guard lock(mu_);
  auto level = in_flight_.find(priority);
  if (level == in_flight_.end()) return;
  auto it = level->second.find(fairness_id);
  if (it == level->second.end()) return;
  if (--it->second <= 0) level->second.erase(it);
  if (level->second.empty()) in_flight_.erase(level);
}

int FairShareLedger::InFlight(int priority, std::string_view fairness_id) const {
  std::lock_guard lock(mu_);
  auto level = in_flight_.find(priority);
  if (level == in_flight_.end()) return 0;
  auto it = level->second.find(fairness_id);
  return it == level->second.end() ? 0 : it->second;
}

}  // namespace kvroute::extproc
