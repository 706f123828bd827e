// EPP admission: what the Inference Extension's request headers ask of the picker
// (reference §5, `pkg/lwepp/metadata/consts.go`) and whether a sheddable request is admitted.
//
//   x-gateway-inference-objective    names an InferenceObjective; its priority (higher = more
//                                    critical; unset or unknown = 0, as the CRD says) comes from
//                                    the pool's InferenceObjective objects, else `epp.objectives`
//                                    (epp_policy.h). Negative priority = sheddable.
//   x-gateway-inference-fairness-id  the tenant whose fair share of a saturated pool is judged
//                                    (epp_fairness.h); absent: "", one default flow.
//   x-gateway-model-name-rewrite     the model the request is routed, scored and forwarded as
//                                    (epp_router.h: the body's "model" is rewritten).
//
// Shedding (llm-d's saturation-detector shape): a sheddable request is answered 429 when every
// candidate worker is saturated — its last scrape shows at least `queue_depth` waiting requests
// or KV usage at least `kv_usage`, or it has no scrape younger than `metrics_max_age_s` (no
// evidence of room). Requests of priority >= 0 are never shed here (the fairness rule may refuse one).
//
// Thread safety: pure functions over values.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/types.h"
#include "fleet/scraped_metrics.h"

namespace kvroute::extproc {

inline constexpr const char* kObjectiveHeader = "x-gateway-inference-objective";
inline constexpr const char* kFairnessIdHeader = "x-gateway-inference-fairness-id";
inline constexpr const char* kModelRewriteHeader = "x-gateway-model-name-rewrite";

struct EppAdmissionOptions {
  // InferenceObjective name → spec.priority from the config (`epp.objectives`); the cluster's
  // objects override it (epp_policy.h).
  std::map<std::string, int> objective_priority;
  int queue_depth = 5;            // waiting requests (vllm:num_requests_waiting) that saturate
  double kv_usage = 0.8;          // KV cache usage fraction that saturates
  double metrics_max_age_s = 2.0;  // an older scrape shows no room
};

struct RequestObjective {
  std::string objective;    // the header's value, "" when absent
  std::string fairness_id;  // ditto
  std::string model_rewrite;
  int priority = 0;
  bool sheddable() const { return priority < 0; }
};

// `headers`: lower-case names, as Envoy sends them; `priority_of`: an objective name's
// priority (EppPolicy::Priority).
RequestObjective ReadObjective(const std::map<std::string, std::string>& headers,
                               const std::function<int(std::string_view)>& priority_of);

enum class Saturation {
  kRoom,          // below both thresholds, fresh
  kQueueFull,     // num_waiting >= queue_depth
  kKvFull,        // kv_usage >= kv_usage threshold
  kNoFreshScrape  // none, or older than metrics_max_age_s
};
Saturation WorkerSaturation(const std::optional<fleet::EngineMetrics>& metrics, Nanos now,
                            const EppAdmissionOptions& options);
const char* SaturationName(Saturation s);

}  // namespace kvroute::extproc
