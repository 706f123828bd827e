#include "telemetry/prometheus_text.h"

#include <prometheus/text_serializer.h>

namespace kvroute::telemetry {

std::string ExposeText(const prometheus::Registry& registry) {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(registry.Collect());
}

}  // namespace kvroute::telemetry
