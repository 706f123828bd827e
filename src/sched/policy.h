// Policy: an ordered list of filters, weighted scorers and one picker — and the host that
// runs them and enforces their contracts (plugin.h). Built by the registry (registry.h) from
// YAML or a preset; immutable afterwards.
//
// Decide(request, workers, state):
//   1. Candidates = every worker in the snapshot, with its cache view from the request (a
//      worker without one holds nothing; "any" depth is clamped up to the deepest tier).
//   2. Filters in declared order, each on the survivors of the previous ones. If a filter
//      would drop every survivor, its IfAllDropped rule decides: kFail ends the decision with
//      no worker (why_none names the filter); kKeepAll skips that filter (a note says so).
//   3. Each scorer scores the survivors; a NaN/inf cost or a wrong count is a SchedError
//      naming the scorer. total = sum(weight * cost).
//   4. The picker chooses among survivors; a bad row index is a SchedError naming it.
//   5. When the policy reads rates, predicted TTFT and ITL are recorded for every survivor
//      whose snapshot has the rates (informational; never changes the choice).
// With TraceDetail::kChosenOnly the same steps run and make the same choice with the same
// PolicyState draws, but only the chosen worker's CandidateTrace is recorded (no per-candidate
// strings or vectors): for callers that decide millions of times over thousands of workers.
// Errors mean a broken plug-in or unusable input; "no worker" is a normal Decision.
//
// Thread safety: a Policy is immutable; share one across threads (shared_ptr<const Policy>).
// Each caller passes its own PolicyState. Decide reads no clock and has no side effects
// besides PolicyState.
#pragma once

#include <expected>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sched/decision.h"
#include "sched/plugin.h"

namespace kvroute::sched {

enum class IfAllDropped {
  kFail,     // no candidate survives: the decision has no worker (hard constraint)
  kKeepAll,  // skip this filter for this request (soft preference)
};
const char* IfAllDroppedName(IfAllDropped rule);

// How much of its reasoning Decide records in Decision::candidates.
enum class TraceDetail {
  kFull,        // every candidate in snapshot order: filter outcome and reason, costs, total,
                // probability, predicted TTFT/ITL (the gateway: /debug/route, logs, tests)
  kChosenOnly,  // at most one entry, the chosen worker's (costs, total, probability,
                // predictions); why_none and notes as in kFull (kvroute simulate)
};

struct FilterStep {
  std::shared_ptr<const Filter> filter;
  IfAllDropped if_all_dropped = IfAllDropped::kFail;
};

struct ScorerStep {
  std::shared_ptr<const Scorer> scorer;
  double weight = 1.0;  // finite, >= 0 (the registry validates)
};

class Policy {
 public:
  // REQUIRES: picker non-null, every filter/scorer non-null, weights finite and >= 0.
  // `effective_config`: the policy as YAML with every default resolved (the registry fills
  // it; empty for hand-built policies).
  Policy(std::string name, std::vector<FilterStep> filters, std::vector<ScorerStep> scorers,
         std::shared_ptr<const Picker> picker, std::string effective_config = {});
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<FilterStep>& filters() const { return filters_; }
  const std::vector<ScorerStep>& scorers() const { return scorers_; }
  const Picker& picker() const { return *picker_; }
  const std::string& effective_config() const { return effective_config_; }

  // Union of the inputs the plug-ins declare: the caller computes only these.
  Inputs RequiredInputs() const { return inputs_; }

  std::expected<Decision, SchedError> Decide(const RequestProfile& request,
                                             std::span<const WorkerSnapshot> workers,
                                             PolicyState& state,
                                             TraceDetail detail = TraceDetail::kFull) const;

 private:
  std::string name_;
  std::vector<FilterStep> filters_;
  std::vector<ScorerStep> scorers_;
  std::shared_ptr<const Picker> picker_;
  std::string effective_config_;
  Inputs inputs_ = kNoInputs;
};

}  // namespace kvroute::sched
