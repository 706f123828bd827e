// FairShareLedger: the picker's fairness rule for `x-gateway-inference-fairness-id` — who holds
// more than a fair share of the pool while it is saturated.
//
// The ledger counts the requests kvroute serve --epp has routed and not yet seen end, per
// priority and fairness id (a request without the header counts under the id "", one default
// flow). The rule, applied only when the pool is saturated (every candidate saturated, the
// same test as shedding: epp_admission.h) and only among requests of the same priority:
//
//   n  = requests in flight at this priority, k = fairness ids with at least one of them, the
//   asking id included (counted even when it holds none), share = n / k.
//   The asking id is over its share when k >= 2 and it holds more than `share`: its request
//   is answered 429 (rate_limit_error, code fairness_share_exceeded) while ids at or under
//   their share are still routed.
//
// So one tenant alone is never shed by this rule (k = 1), tenants holding equal counts are
// all routed, and a newcomer holding none always is; the shed tenant's requests are routed
// again once its count is back within the share (others' grow, or its own finish). A pool
// with room applies no fairness at all: the rule rations saturation, it does not cap tenants.
// Sheddable requests (priority < 0) are shed on saturation before this rule is asked.
//
// Admit judges and counts in one step (under one lock), so two requests of one tenant
// arriving together cannot both slip under the share.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace kvroute::extproc {

struct FairShareVerdict {
  bool over = false;  // refused: nothing was counted
  int held = 0;       // the id's requests in flight at the priority, before this one
  int in_flight = 0;  // n: all requests in flight at the priority, before this one
  int ids = 0;        // k
  double share = 0;   // n / k
};

class FairShareLedger {
 public:
  // When `saturated`, judges the rule above; unless over, counts the request as in flight.
  FairShareVerdict Admit(int priority, const std::string& fairness_id, bool saturated);
  // The request admitted under (priority, fairness_id) has ended (or was never routed).
  void Release(int priority, const std::string& fairness_id);
  int InFlight(int priority, std::string_view fairness_id) const;

 private:
  mutable std::mutex mu_;
  std::map<int, std::map<std::string, int, std::less<>>> in_flight_;  // guarded by mu_; no zeros
};

}  // namespace kvroute::extproc
