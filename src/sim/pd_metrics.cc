#include "sim/pd_metrics.h"

#include <cmath>

namespace kvroute::sim {
namespace {

prometheus::Labels LabelsOf(const telemetry::VllmMetricLabels& l) {
  return {{"model_name", l.model_name}, {"engine", l.engine}};
}

prometheus::Counter& Counter(prometheus::Registry& r, const char* name, const char* help,
                             const prometheus::Labels& labels) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels);
}

prometheus::Gauge& Gauge(prometheus::Registry& r, const char* name, const char* help,
                         const prometheus::Labels& labels) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(labels);
}

prometheus::Histogram& Histogram(prometheus::Registry& r, const char* name, const char* help,
                                 const prometheus::Labels& labels, std::vector<double> buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(labels, buckets);
}

}  // namespace

std::vector<double> NixlXferTimeBuckets() {
  // vLLM drops the first (0.001) of its shared list for the transfer-time histogram.
  return {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0};
}

std::vector<double> NixlBytesBuckets() {
  std::vector<double> out;
  for (int i = 1; i < 25; i += 2) out.push_back(std::ldexp(1.0, 10 + i));  // 2^(10+i)
  return out;
}

PdMetrics::PdMetrics(prometheus::Registry& r, const telemetry::VllmMetricLabels& l)
    : xfer_time(Histogram(r, "vllm:nixl_xfer_time_seconds",
                          "Histogram of transfer duration for NIXL KV Cache transfers.",
                          LabelsOf(l), NixlXferTimeBuckets())),
      bytes_transferred(Histogram(r, "vllm:nixl_bytes_transferred",
                                  "Histogram of bytes transferred per NIXL KV Cache transfers.",
                                  LabelsOf(l), NixlBytesBuckets())),
      failed_transfers(Counter(r, "vllm:nixl_num_failed_transfers_total",
                               "Number of failed NIXL KV Cache transfers.", LabelsOf(l))),
      failed_notifications(Counter(r, "vllm:nixl_num_failed_notifications_total",
                                   "Number of failed NIXL KV Cache notifications.", LabelsOf(l))),
      transferred_blocks(Counter(r, "kvroute:nixl_transferred_blocks_total",
                                 "KV blocks pulled from prefill engines (kvroute sim).",
                                 LabelsOf(l))),
      expired_reqs(Counter(r, "vllm:nixl_num_kv_expired_reqs_total",
                           "Number of requests that had their KV expire.", LabelsOf(l))),
      pinned_blocks(Gauge(r, "kvroute:nixl_pinned_blocks",
                          "KV blocks pinned for decoders to read (kvroute sim).", LabelsOf(l))),
      pinned_requests(Gauge(r, "kvroute:nixl_pinned_requests",
                            "Finished prefills whose KV waits for a decoder (kvroute sim).",
                            LabelsOf(l))),
      released_reqs(Counter(r, "kvroute:nixl_released_reqs_total",
                            "Pinned prefills freed after their decoder read them (kvroute sim).",
                            LabelsOf(l))) {}

}  // namespace kvroute::sim
