// Prometheus text exposition (format 0.0.4) of a prometheus-cpp registry. /metrics is
// served by our own HTTP server (net/), so prometheus-cpp's civetweb exposer is not used.
//
// Thread safety: prometheus-cpp registries and metrics are safe to update and collect
// concurrently; ExposeText may run on any thread.
#pragma once

#include <prometheus/registry.h>

#include <string>

namespace kvroute::telemetry {

// Content-Type of the text exposition format.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string ExposeText(const prometheus::Registry& registry);

}  // namespace kvroute::telemetry
