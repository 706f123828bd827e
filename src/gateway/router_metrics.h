// RouterMetrics: every Prometheus metric `kvroute serve` exports, in one list (this file), on
// one prometheus-cpp registry. Request-path code calls the typed On*/Observe* methods; gauges
// that mirror other components' state (index size, event lag, worker health, parity) are set
// by the gateway just before each /metrics exposition.
//
// Names (all prefixed kvroute_):
//   requests_total{model,worker,status}          counter  answered requests (status: HTTP code)
//   request_errors_total{reason}                 counter  refused/failed before or while proxying
//   retries_total{reason}                        counter  attempts moved to another worker
//   stream_migrations_total{outcome}             counter  mid-stream worker failures met by
//                                                         migration: resumed, completed,
//                                                         no_worker, failed, unsupported, limit
//   scheduling_failures_total{failure_mode}      counter  scheduling path errors (fail open/close)
//   ttft_seconds{model}                          histogram router-seen time to first token
//   itl_seconds{model}                           histogram router-seen inter-token latency
//   decision_latency_seconds                     histogram tokenize + lookup + Decide
//   predicted_cached_tokens_total{tier}          counter  prompt tokens predicted cached at route
//   prompt_tokens_total                          counter  prompt tokens routed
//   inflight_requests                            gauge    requests being proxied
//   worker_healthy{worker}                       gauge    1 routable, 0 not
//   worker_draining{worker}                      gauge    1 draining
//   worker_inflight_requests{worker}             gauge    router-side in-flight per worker
//   ttft_wait_correction{worker}                 gauge    factor on predicted queueing (1: none)
//   ttft_prediction_drift{worker}                gauge    measured / predicted TTFT, recent
//                                                         geometric mean (1: calibrated)
//   index_blocks                                 gauge    distinct blocks in the KV index
//   index_entries                                gauge    (block, worker) pairs
//   predicted_blocks                             gauge    entries of the predict-on-route overlay
//   kv_event_lag_seconds{worker}                 gauge    now - ts of the last event batch
//   parity_ratio{worker}                         gauge    predicted blocks the events confirmed
//                                                         since start ("all": every worker)
//   parity_mismatch{worker,setting}              gauge    1 while the worker disagrees with
//                                                         kvroute on a setting that keys
//                                                         blocks (block_size, tokenizer,
//                                                         chat_template, hash, kv_events)
//   pd_requests_total{placement}                 counter  requests placed by the P/D decision
//                                                         (split, aggregated, local_fallback:
//                                                         split, then decoded locally on D)
//   pd_prefill_fallbacks_total{reason}           counter  prefill legs that failed or timed out
//                                                         (the request decoded locally on D)
//   kv_link_lane_bytes_per_s{worker}             gauge    a decode worker's KV link per lane,
//                                                         learned from its pulls (once it has any)
//   kv_link_samples{worker}                      gauge    samples it was learned from (one per
//                                                         scrape window with finished pulls)
//   ready                                        gauge    1 when /ready answers 200
//   discovery_etcd_connected                     gauge    1 while the etcd watch is open
//   discovery_etcd_failures_total                counter  failed etcd calls / broken watches
//   discovery_malformed_records_total            counter  worker records skipped as malformed
//   discovery_workers                            gauge    workers known from etcd
//   discovery_kubernetes_failures_total          counter  Kubernetes API requests that got no
//                                                         answer (a refused TLS certificate, an
//                                                         unreachable server, HTTP errors)
//   replica_peers                                gauge    siblings whose delta stream is up
//   replica_remote_bookings                      gauge    siblings' bookings held (also counted
//                                                         in worker_inflight_requests)
//   replica_deltas_received_total                counter  deltas applied from siblings
//   replica_remote_expired_total                 counter  remote bookings dropped by their TTL
//   replica_unknown_worker_total                 counter  deltas naming a worker we lack
//
// Thread safety: prometheus-cpp metrics are thread-safe; every method may be called from any
// thread. Ownership: owns the registry; metric handles live as long as this object.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kvroute::gateway {

class RouterMetrics {
 public:
  RouterMetrics();
  RouterMetrics(const RouterMetrics&) = delete;
  RouterMetrics& operator=(const RouterMetrics&) = delete;

  void OnRequestDone(std::string_view model, std::string_view worker, int status);
  void OnError(std::string_view reason);
  void OnRetry(std::string_view reason);
  void OnStreamMigration(std::string_view outcome);
  void OnSchedulingFailure(std::string_view failure_mode);
  void OnPdPlacement(std::string_view placement);
  void OnPdPrefillFallback(std::string_view reason);
  void ObserveTtft(std::string_view model, double seconds);
  void ObserveItl(std::string_view model, double seconds);
  // The TTFT / ITL histogram of `model`, for a caller that observes many times for one model
  // (the proxy caches them per lane: ITL is observed once per relayed chunk). Each call is
  // a label lookup under the family's lock; the reference stays valid as long as this object.
  prometheus::Histogram& TtftHistogram(std::string_view model);
  prometheus::Histogram& ItlHistogram(std::string_view model);
  void ObserveDecision(double seconds);
  void AddPredictedCached(std::string_view tier, double tokens);
  void AddPromptTokens(double tokens);
  void InflightDelta(double delta);

  void SetWorkerState(std::string_view worker, bool healthy, bool draining, double inflight);
  void SetTtftCalibration(std::string_view worker, double wait_correction, double drift);
  void SetKvLink(std::string_view worker, double lane_bytes_per_s, double samples);
  // A worker's learned load bandwidth from one lower tier (fleet::TierLoadLearner) and the
  // samples it came from; `tier` is the medium name ("CPU", "DISK", "SHARED").
  void SetTierLoad(std::string_view worker, std::string_view tier, double bytes_per_s,
                   double samples);
  void SetIndex(double blocks, double entries, double predicted_blocks);
  void SetEventLag(std::string_view worker, double seconds);
  void SetParity(std::string_view worker, double ratio);
  void SetParityMismatch(std::string_view worker, std::string_view setting, bool mismatch);
  void SetReady(bool ready);
  // etcd discovery: watch open, the watcher's failure and malformed-record totals, workers.
  void SetDiscovery(bool connected, std::uint64_t failures, std::uint64_t malformed,
                    double workers);
  // The replica delta stream (docs/replicas.md); totals are mirrored (monotonic).
  void SetReplicas(double peers, double remote_bookings, std::uint64_t received,
                   std::uint64_t expired, std::uint64_t unknown_worker);
  // Kubernetes discovery: one more API request without its answer.
  void OnKubernetesDiscoveryFailure();
  // A worker left the fleet: its per-worker gauges go (requests_total keeps its history).
  void ForgetWorker(std::string_view worker);

  // The text exposition of every metric.
  std::string Expose() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Family<prometheus::Counter>* retries_;
  prometheus::Family<prometheus::Counter>* migrations_;
  prometheus::Family<prometheus::Counter>* sched_failures_;
  prometheus::Family<prometheus::Counter>* pd_placements_;
  prometheus::Family<prometheus::Counter>* pd_fallbacks_;
  prometheus::Family<prometheus::Histogram>* ttft_;
  prometheus::Family<prometheus::Histogram>* itl_;
  prometheus::Histogram* decision_;
  prometheus::Family<prometheus::Counter>* predicted_cached_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Gauge* inflight_;
  prometheus::Family<prometheus::Gauge>* worker_healthy_;
  prometheus::Family<prometheus::Gauge>* worker_draining_;
  prometheus::Family<prometheus::Gauge>* worker_inflight_;
  prometheus::Family<prometheus::Gauge>* wait_correction_;
  prometheus::Family<prometheus::Gauge>* ttft_drift_;
  prometheus::Family<prometheus::Gauge>* kv_link_;
  prometheus::Family<prometheus::Gauge>* kv_link_samples_;
  prometheus::Family<prometheus::Gauge>* tier_load_;
  prometheus::Family<prometheus::Gauge>* tier_load_samples_;
  prometheus::Gauge* index_blocks_;
  prometheus::Gauge* index_entries_;
  prometheus::Gauge* predicted_blocks_;
  prometheus::Family<prometheus::Gauge>* event_lag_;
  prometheus::Family<prometheus::Gauge>* parity_;
  prometheus::Family<prometheus::Gauge>* parity_mismatch_;
  prometheus::Gauge* ready_;
  prometheus::Gauge* etcd_connected_;
  prometheus::Counter* etcd_failures_;
  prometheus::Counter* etcd_malformed_;
  prometheus::Counter* kubernetes_failures_;
  prometheus::Gauge* discovered_;
  prometheus::Gauge* replica_peers_;
  prometheus::Gauge* replica_remote_;
  prometheus::Counter* replica_received_;
  prometheus::Counter* replica_expired_;
  prometheus::Counter* replica_unknown_;
};

}  // namespace kvroute::gateway
