#include "gateway/health_checker.h"

#include <utility>

namespace kvroute::gateway {

HealthChecker::HealthChecker(HealthCheckerOptions options, TargetsFn targets, fleet::WorkerHealth* health,
                             const Clock* clock)
    : PeriodicPoller(
          {.interval = options.interval, .timeout = options.timeout, .path = options.path},
          std::move(targets), [health, clock](WorkerId worker, PollOutcome outcome) {
            // No answer, a bad URL and a non-2xx status all count against the worker.
            if (outcome && outcome->status >= 200 && outcome->status < 300) {
              health->OnSuccess(worker, clock->Now());
            } else {
              health->OnFailure(worker, clock->Now());
            }
          }) {}

}  // namespace kvroute::gateway
