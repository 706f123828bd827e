// PdMetrics: the P/D transfer metrics of `kvroute sim`, with vLLM's NixlConnector names
// where vLLM has them (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py,
// NixlPromMetrics; buckets as there) and kvroute's own names where it has none:
//
//   decode side  vllm:nixl_xfer_time_seconds            histogram  per transfer (simulated s)
//                vllm:nixl_bytes_transferred            histogram  per transfer (modelled bytes)
//                vllm:nixl_num_failed_transfers_total   counter    claims refused / unreachable
//                vllm:nixl_num_failed_notifications_total counter  releases the prefill missed
//                kvroute:nixl_transferred_blocks_total  counter    blocks pulled
//   prefill side vllm:nixl_num_kv_expired_reqs_total    counter    pins freed at the timeout
//                kvroute:nixl_pinned_blocks             gauge      blocks pinned now
//                kvroute:nixl_pinned_requests           gauge      prefills pinned now
//                kvroute:nixl_released_reqs_total       counter    pins freed by a decoder
//
// Registered only when the sim runs with --kv-transfer-config (vLLM registers its connector
// metrics only with a connector). Labels: model_name and engine, as every vLLM series.
//
// Ownership: references into the registry, which must outlive this.
// Thread safety: prometheus-cpp metrics may be updated from any thread.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>
#include <vector>

#include "telemetry/vllm_metrics.h"

namespace kvroute::sim {

// vLLM's bucket layouts for the NIXL histograms.
std::vector<double> NixlXferTimeBuckets();  // 0.005 … 5 s
std::vector<double> NixlBytesBuckets();     // 2 KiB … 8 GiB, ×4 apart

struct PdMetrics {
  PdMetrics(prometheus::Registry& registry, const telemetry::VllmMetricLabels& labels);

  prometheus::Histogram& xfer_time;
  prometheus::Histogram& bytes_transferred;
  prometheus::Counter& failed_transfers;
  prometheus::Counter& failed_notifications;
  prometheus::Counter& transferred_blocks;
  prometheus::Counter& expired_reqs;
  prometheus::Gauge& pinned_blocks;
  prometheus::Gauge& pinned_requests;
  prometheus::Counter& released_reqs;
};

}  // namespace kvroute::sim
