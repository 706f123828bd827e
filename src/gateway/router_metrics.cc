#include "gateway/router_metrics.h"

#include <map>

#include "telemetry/prometheus_text.h"

namespace kvroute::gateway {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Latency buckets (seconds): TTFT spans queueing + prefill (ms to minutes); ITL is a decode
// step (ms to a second); a decision is microseconds to milliseconds.
const prometheus::Histogram::BucketBoundaries kTtftBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0,   2.5,   5.0,  7.5,  10,   20,   40,   80,  160,  640};
const prometheus::Histogram::BucketBoundaries kItlBuckets = {
    0.001, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,  0.15, 0.2,
    0.3,   0.4,   0.5,  0.75,  1.0,  2.5,   5.0,  7.5,  10.0, 20.0,  40.0, 80.0};
const prometheus::Histogram::BucketBoundaries kDecisionBuckets = {
    1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 0.1};

std::string S(std::string_view v) { return std::string(v); }

}  // namespace

RouterMetrics::RouterMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  requests_ = &BuildCounter()
                   .Name("kvroute_requests_total")
                   .Help("Requests answered, by model, worker and HTTP status")
                   .Register(r);
  errors_ = &BuildCounter()
                 .Name("kvroute_request_errors_total")
                 .Help("Requests refused or failed by kvroute, by reason")
                 .Register(r);
  retries_ = &BuildCounter()
                  .Name("kvroute_retries_total")
                  .Help("Attempts moved to another worker before anything reached the client")
                  .Register(r);
  migrations_ = &BuildCounter()
                     .Name("kvroute_stream_migrations_total")
                     .Help("Streams whose worker died mid-stream, by what migration did: "
                           "resumed on another worker, completed (nothing left), or not")
                     .Register(r);
  pd_placements_ = &BuildCounter()
                        .Name("kvroute_pd_requests_total")
                        .Help("Requests placed by the prefill/decode decision, by placement")
                        .Register(r);
  pd_fallbacks_ = &BuildCounter()
                       .Name("kvroute_pd_prefill_fallbacks_total")
                       .Help("Prefill legs that failed or timed out: decoded locally instead")
                       .Register(r);
  sched_failures_ = &BuildCounter()
                         .Name("kvroute_scheduling_failures_total")
                         .Help("Scheduling path errors, by the failure mode that handled them")
                         .Register(r);
  ttft_ = &BuildHistogram()
               .Name("kvroute_ttft_seconds")
               .Help("Time to first token as seen by the router, seconds")
               .Register(r);
  itl_ = &BuildHistogram()
              .Name("kvroute_itl_seconds")
              .Help("Inter-token latency as seen by the router, seconds")
              .Register(r);
  decision_ = &BuildHistogram()
                   .Name("kvroute_decision_latency_seconds")
                   .Help("Tokenize + index lookup + policy decision, seconds")
                   .Register(r)
                   .Add({}, kDecisionBuckets);
  predicted_cached_ = &BuildCounter()
                           .Name("kvroute_predicted_cached_tokens_total")
                           .Help("Prompt tokens predicted cached on the chosen worker, by tier")
                           .Register(r);
  prompt_tokens_ = &BuildCounter()
                        .Name("kvroute_prompt_tokens_total")
                        .Help("Prompt tokens of routed requests")
                        .Register(r)
                        .Add({});
  inflight_ = &BuildGauge()
                   .Name("kvroute_inflight_requests")
                   .Help("Requests being proxied")
                   .Register(r)
                   .Add({});
  worker_healthy_ = &BuildGauge()
                         .Name("kvroute_worker_healthy")
                         .Help("1 when the worker takes new requests (healthy, not draining)")
                         .Register(r);
  worker_draining_ = &BuildGauge()
                          .Name("kvroute_worker_draining")
                          .Help("1 when the worker is draining (admin)")
                          .Register(r);
  worker_inflight_ = &BuildGauge()
                          .Name("kvroute_worker_inflight_requests")
                          .Help("Router-side in-flight requests per worker")
                          .Register(r);
  wait_correction_ = &BuildGauge()
                          .Name("kvroute_ttft_wait_correction")
                          .Help("Factor on the worker's predicted queueing time, learned from "
                                "measured TTFT and raised while a request is overdue (1: none)")
                          .Register(r);
  ttft_drift_ = &BuildGauge()
                     .Name("kvroute_ttft_prediction_drift")
                     .Help("Measured / predicted TTFT on the worker, recent geometric mean "
                           "(1: calibrated)")
                     .Register(r);
  kv_link_ = &BuildGauge()
                  .Name("kvroute_kv_link_lane_bytes_per_s")
                  .Help("A decode worker's KV link bandwidth per lane, learned from its pulls")
                  .Register(r);
  kv_link_samples_ = &BuildGauge()
                          .Name("kvroute_kv_link_samples")
                          .Help("Samples the decode worker's link was learned from (scrape windows with pulls)")
                          .Register(r);
  tier_load_ = &BuildGauge()
                    .Name("kvroute_tier_load_bytes_per_s")
                    .Help("A worker's load bandwidth from a lower KV tier into GPU memory, "
                          "learned from first tokens and engine load counters (seed: the profile)")
                    .Register(r);
  tier_load_samples_ = &BuildGauge()
                            .Name("kvroute_tier_load_samples")
                            .Help("Samples the worker's tier load bandwidth was learned from")
                            .Register(r);
  index_blocks_ = &BuildGauge()
                       .Name("kvroute_index_blocks")
                       .Help("Distinct blocks in the KV index")
                       .Register(r)
                       .Add({});
  index_entries_ = &BuildGauge()
                        .Name("kvroute_index_entries")
                        .Help("(block, worker) pairs in the KV index")
                        .Register(r)
                        .Add({});
  predicted_blocks_ = &BuildGauge()
                           .Name("kvroute_predicted_blocks")
                           .Help("Blocks in the predicted-blocks overlay (own routing history)")
                           .Register(r)
                           .Add({});
  event_lag_ = &BuildGauge()
                    .Name("kvroute_kv_event_lag_seconds")
                    .Help("Wall-clock now minus the timestamp of the worker's last event batch")
                    .Register(r);
  parity_ = &BuildGauge()
                 .Name("kvroute_parity_ratio")
                 .Help("Fraction of predicted blocks the worker's events confirmed")
                 .Register(r);
  parity_mismatch_ = &BuildGauge()
                          .Name("kvroute_parity_mismatch")
                          .Help(
                              "1 while the worker disagrees with kvroute on a setting that "
                              "keys KV blocks (block_size, tokenizer, chat_template, hash, "
                              "kv_events)")
                          .Register(r);
  ready_ =
      &BuildGauge().Name("kvroute_ready").Help("1 when /ready answers 200").Register(r).Add({});
  etcd_connected_ = &BuildGauge()
                         .Name("kvroute_discovery_etcd_connected")
                         .Help("1 while the etcd watch of the worker prefix is open")
                         .Register(r)
                         .Add({});
  etcd_failures_ = &BuildCounter()
                        .Name("kvroute_discovery_etcd_failures_total")
                        .Help("Failed etcd ranges and watches, and broken watch streams")
                        .Register(r)
                        .Add({});
  etcd_malformed_ = &BuildCounter()
                         .Name("kvroute_discovery_malformed_records_total")
                         .Help("Worker records in etcd skipped as malformed")
                         .Register(r)
                         .Add({});
  kubernetes_failures_ =
      &BuildCounter()
           .Name("kvroute_discovery_kubernetes_failures_total")
           .Help("Kubernetes API requests of the InferencePool watcher that got no answer "
                 "(refused TLS certificate, unreachable server, HTTP errors)")
           .Register(r)
           .Add({});
  discovered_ = &BuildGauge()
                     .Name("kvroute_discovery_workers")
                     .Help("Workers known from etcd (draining ones included)")
                     .Register(r)
                     .Add({});
  replica_peers_ = &BuildGauge()
                        .Name("kvroute_replica_peers")
                        .Help("Sibling replicas whose booking delta stream is up")
                        .Register(r)
                        .Add({});
  replica_remote_ = &BuildGauge()
                         .Name("kvroute_replica_remote_bookings")
                         .Help("Bookings of sibling replicas held (also in "
                               "kvroute_worker_inflight_requests)")
                         .Register(r)
                         .Add({});
  replica_received_ = &BuildCounter()
                           .Name("kvroute_replica_deltas_received_total")
                           .Help("Booking and prediction deltas applied from sibling replicas")
                           .Register(r)
                           .Add({});
  replica_expired_ = &BuildCounter()
                          .Name("kvroute_replica_remote_expired_total")
                          .Help("Remote bookings dropped by replicas.remote_booking_ttl_s "
                                "(their release never came)")
                          .Register(r)
                          .Add({});
  replica_unknown_ = &BuildCounter()
                          .Name("kvroute_replica_unknown_worker_total")
                          .Help("Sibling deltas skipped: they name a worker this replica lacks")
                          .Register(r)
                          .Add({});
}

namespace {
void Mirror(prometheus::Counter* c, std::uint64_t total) {
  if (const double t = static_cast<double>(total); t > c->Value()) c->Increment(t - c->Value());
}
}  // namespace

void RouterMetrics::SetReplicas(double peers, double remote_bookings, std::uint64_t received,
                                std::uint64_t expired, std::uint64_t unknown_worker) {
  replica_peers_->Set(peers);
  replica_remote_->Set(remote_bookings);
  Mirror(replica_received_, received);
  Mirror(replica_expired_, expired);
  Mirror(replica_unknown_, unknown_worker);
}

void RouterMetrics::OnKubernetesDiscoveryFailure() { kubernetes_failures_->Increment(); }

void RouterMetrics::SetDiscovery(bool connected, std::uint64_t failures, std::uint64_t malformed,
                                 double workers) {
  etcd_connected_->Set(connected ? 1 : 0);
  // Counters mirror the watcher's own totals (monotonic), so only the difference is added.
  if (const double f = static_cast<double>(failures); f > etcd_failures_->Value()) {
    etcd_failures_->Increment(f - etcd_failures_->Value());
  }
  if (const double m = static_cast<double>(malformed); m > etcd_malformed_->Value()) {
    etcd_malformed_->Increment(m - etcd_malformed_->Value());
  }
  discovered_->Set(workers);
}

void RouterMetrics::ForgetWorker(std::string_view worker) {
  const std::map<std::string, std::string> labels{{"worker", S(worker)}};
  for (auto* family : {worker_healthy_, worker_draining_, worker_inflight_, wait_correction_,
                       ttft_drift_, event_lag_, parity_, kv_link_, kv_link_samples_}) {
    if (family->Has(labels)) family->Remove(&family->Add(labels));
  }
  for (const char* tier : {"CPU", "DISK", "SHARED"}) {
    const std::map<std::string, std::string> tiered{{"worker", S(worker)}, {"tier", tier}};
    for (auto* family : {tier_load_, tier_load_samples_}) {
      if (family->Has(tiered)) family->Remove(&family->Add(tiered));
    }
  }
}

void RouterMetrics::OnRequestDone(std::string_view model, std::string_view worker, int status) {
  requests_->Add({{"model", S(model)}, {"worker", S(worker)}, {"status", std::to_string(status)}})
      .Increment();
}
void RouterMetrics::OnError(std::string_view reason) {
  errors_->Add({{"reason", S(reason)}}).Increment();
}
void RouterMetrics::OnRetry(std::string_view reason) {
  retries_->Add({{"reason", S(reason)}}).Increment();
}
void RouterMetrics::OnStreamMigration(std::string_view outcome) {
  migrations_->Add({{"outcome", S(outcome)}}).Increment();
}
void RouterMetrics::OnPdPlacement(std::string_view placement) {
  pd_placements_->Add({{"placement", S(placement)}}).Increment();
}
void RouterMetrics::OnPdPrefillFallback(std::string_view reason) {
  pd_fallbacks_->Add({{"reason", S(reason)}}).Increment();
}
void RouterMetrics::OnSchedulingFailure(std::string_view failure_mode) {
  sched_failures_->Add({{"failure_mode", S(failure_mode)}}).Increment();
}
void RouterMetrics::ObserveTtft(std::string_view model, double seconds) {
  TtftHistogram(model).Observe(seconds);
}
prometheus::Histogram& RouterMetrics::TtftHistogram(std::string_view model) {
  return ttft_->Add({{"model", S(model)}}, kTtftBuckets);
}
void RouterMetrics::ObserveItl(std::string_view model, double seconds) {
  ItlHistogram(model).Observe(seconds);
}
prometheus::Histogram& RouterMetrics::ItlHistogram(std::string_view model) {
  return itl_->Add({{"model", S(model)}}, kItlBuckets);
}
void RouterMetrics::ObserveDecision(double seconds) { decision_->Observe(seconds); }
void RouterMetrics::AddPredictedCached(std::string_view tier, double tokens) {
  if (tokens > 0) predicted_cached_->Add({{"tier", S(tier)}}).Increment(tokens);
}
void RouterMetrics::AddPromptTokens(double tokens) {
  if (tokens > 0) prompt_tokens_->Increment(tokens);
}
void RouterMetrics::InflightDelta(double delta) { inflight_->Increment(delta); }

void RouterMetrics::SetWorkerState(std::string_view worker, bool healthy, bool draining,
                                   double inflight) {
  worker_healthy_->Add({{"worker", S(worker)}}).Set(healthy ? 1 : 0);
  worker_draining_->Add({{"worker", S(worker)}}).Set(draining ? 1 : 0);
  worker_inflight_->Add({{"worker", S(worker)}}).Set(inflight);
}
void RouterMetrics::SetKvLink(std::string_view worker, double lane_bytes_per_s,
                              double samples) {
  kv_link_->Add({{"worker", S(worker)}}).Set(lane_bytes_per_s);
  kv_link_samples_->Add({{"worker", S(worker)}}).Set(samples);
}
void RouterMetrics::SetTierLoad(std::string_view worker, std::string_view tier,
                                double bytes_per_s, double samples) {
  tier_load_->Add({{"worker", S(worker)}, {"tier", S(tier)}}).Set(bytes_per_s);
  tier_load_samples_->Add({{"worker", S(worker)}, {"tier", S(tier)}}).Set(samples);
}
void RouterMetrics::SetTtftCalibration(std::string_view worker, double wait_correction,
                                       double drift) {
  wait_correction_->Add({{"worker", S(worker)}}).Set(wait_correction);
  ttft_drift_->Add({{"worker", S(worker)}}).Set(drift);
}
void RouterMetrics::SetIndex(double blocks, double entries, double predicted_blocks) {
  index_blocks_->Set(blocks);
  index_entries_->Set(entries);
  predicted_blocks_->Set(predicted_blocks);
}
void RouterMetrics::SetEventLag(std::string_view worker, double seconds) {
  event_lag_->Add({{"worker", S(worker)}}).Set(seconds);
}
void RouterMetrics::SetParity(std::string_view worker, double ratio) {
  parity_->Add({{"worker", S(worker)}}).Set(ratio);
}
void RouterMetrics::SetParityMismatch(std::string_view worker, std::string_view setting,
                                      bool mismatch) {
  parity_mismatch_->Add({{"worker", S(worker)}, {"setting", S(setting)}}).Set(mismatch ? 1 : 0);
}
void RouterMetrics::SetReady(bool ready) { ready_->Set(ready ? 1 : 0); }

std::string RouterMetrics::Expose() const { return telemetry::ExposeText(*registry_); }

}  // namespace kvroute::gateway
