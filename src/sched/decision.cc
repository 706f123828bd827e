#include "sched/decision.h"

#include <fmt/format.h>

namespace kvroute::sched {

const CandidateTrace* Decision::Find(WorkerId worker) const {
  for (const CandidateTrace& c : candidates) {
    if (c.worker == worker) return &c;
  }
  return nullptr;
}

std::string RenderDecision(const Decision& d) {
  std::string out = fmt::format("policy {}: ", d.policy);
  out += d.chosen ? fmt::format("chose worker {}\n", *d.chosen)
                  : fmt::format("no worker: {}\n", d.why_none);
  for (const std::string& note : d.notes) out += fmt::format("  note: {}\n", note);
  for (const CandidateTrace& c : d.candidates) {
    out += fmt::format("  {} {}", c.worker, c.name);
    if (c.cache_stale) out += " (stale cache view)";
    if (c.dropped_by) {
      out += fmt::format(": dropped by {}: {}\n", *c.dropped_by, c.drop_reason);
      continue;
    }
    for (std::size_t i = 0; i < c.costs.size() && i < d.scorers.size(); ++i) {
      out += fmt::format(" {}={:.6g}x{:g}", d.scorers[i].name, c.costs[i], d.scorers[i].weight);
    }
    if (c.total_cost) out += fmt::format(" total={:.6g}", *c.total_cost);
    if (c.probability) out += fmt::format(" p={:.4f}", *c.probability);
    if (c.predicted_ttft_s) out += fmt::format(" ttft={:.4f}s", *c.predicted_ttft_s);
    if (c.predicted_itl_s) out += fmt::format(" itl={:.4f}s", *c.predicted_itl_s);
    out += '\n';
  }
  return out;
}

}  // namespace kvroute::sched
