// The P/D placement of one request as JSON, for `POST /debug/route` (DecisionJson's "pd"
// member): whether the decision split and why — the rule, the chosen option's predicted
// cost against the cheapest option of the other kind, the transfer — the prefill and decode
// workers chosen, and every option the rule priced, cheapest first. Field by field in
// docs/pd.md "Seeing the decision".
//
// Thread safety: pure.
#pragma once

#include <boost/json/object.hpp>
#include <functional>
#include <string>

#include "common/types.h"
#include "sched/pd_decision.h"

namespace kvroute::gateway {

// One option: placement, workers, predicted cost and its parts, the transfer when split.
boost::json::object PdOptionJson(const sched::PdOption& option,
                                 const std::function<std::string(WorkerId)>& name_of);

// The decision. `name_of` names workers (absent or empty answer: "worker <id>").
boost::json::object PdDecisionJson(const sched::PdDecision& decision,
                                   const std::function<std::string(WorkerId)>& name_of);

}  // namespace kvroute::gateway
