#include "extproc/epp_admission.h"

namespace kvroute::extproc {

RequestObjective ReadObjective(const std::map<std::string, std::string>& headers,
                               const std::function<int(std::string_view)>& priority_of) {
  auto value = [&headers](const char* name) {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  };
  RequestObjective out{.objective = value(kObjectiveHeader),
                       .fairness_id = value(kFairnessIdHeader),
                       .model_rewrite = value(kModelRewriteHeader)};
  if (!out.objective.empty()) out.priority = priority_of(out.objective);
  return out;
}

Saturation WorkerSaturation(const std::optional<fleet::EngineMetrics>& metrics, Nanos now,
                            const EppAdmissionOptions& options) {
  if (!metrics || metrics->AgeSeconds(now) > options.metrics_max_age_s) return Saturation::kNoFreshScrape;
  if (metrics->num_waiting && static_cast<int>(*metrics->num_waiting) >= options.queue_depth) {
    return Saturation::kQueueFull;
  }
  if (metrics->kv_usage && *metrics->kv_usage >= options.kv_usage) return Saturation::kKvFull;
  return Saturation::kRoom;
}

const char* SaturationName(Saturation s) {
  switch (s) {
    case Saturation::kRoom:
      return "room";
    case Saturation::kQueueFull:
      return "queue full";
    case Saturation::kKvFull:
      return "kv full";
    case Saturation::kNoFreshScrape:
      return "no fresh scrape";
  }
  return "?";
}

}  // namespace kvroute::extproc
