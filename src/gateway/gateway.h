// Gateway: `kvroute serve` as a library — builds every part from a GatewayConfig, starts them
// in order, and stops them in reverse, with the drain semantics of docs/operations.md.
//
//   Create   validate the config, build the policy and the tokenizer (no I/O yet)
//   Start    learn the block size (config, else the workers' cache_config_info, else 16),
//            warm the index from a sibling replica (replicas.warm_from, replica_warm.h),
//            register workers, subscribe to KV events, start scrapers, health checks, the
//            maintenance thread (model catalog, parity check, prediction expiry) and the
//            HTTP server
//   Drain    readiness false → `shutdown_grace_s` later new connections are refused →
//            in-flight requests run until `drain_timeout_s` → the rest are cut
//
// Ownership: owns every component. Thread safety: Create/Start/Drain/Stop from one thread (the
// command's main thread); port(), ready() and policy() from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <string_view>

#include "fleet/worker_spec.h"
#include "gateway/config.h"
#include "sched/policy.h"

namespace kvroute {
class Clock;
namespace fleet {
class RouterState;
}
}  // namespace kvroute

namespace kvroute::gateway {

class RequestPipeline;
class RouterMetrics;

// The parts of the running request path a second front end needs to decide and book exactly
// as the HTTP proxy does (the ext_proc Endpoint Picker of `kvroute serve --epp`,
// extproc/epp_router.h). Borrowed: valid from Start() until the Gateway is destroyed.
struct RequestPath {
  const RequestPipeline* pipeline = nullptr;
  fleet::RouterState* router_state = nullptr;
  RouterMetrics* metrics = nullptr;
  const Clock* clock = nullptr;
};

class Gateway {
 public:
  static std::expected<std::unique_ptr<Gateway>, std::string> Create(GatewayConfig config);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  std::expected<void, std::string> Start();
  std::uint16_t port() const;
  std::uint32_t block_size() const;
  const sched::Policy& policy() const;
  // REQUIRES: Start() succeeded.
  RequestPath request_path() const;

  // --- Membership at run time (membership.cc): what discovery (etcd, Kubernetes) calls.
  // Any thread, after Start; joins and leaves are serialised.
  // Adds a worker to the running gateway: RouterState, KV-event subscription, health checks,
  // model catalog. Fails (no change) if the name is taken or the spec is invalid.
  std::expected<void, std::string> JoinWorker(fleet::WorkerSpec spec);
  // Marks a worker draining: it gets no new requests; in-flight ones finish.
  bool DrainWorker(std::string_view name);
  // Removes a worker: unsubscribes; its in-flight requests finish or fail as a dead worker's do.
  bool LeaveWorker(std::string_view name);

  // SIGTERM semantics; returns the number of requests cut at the deadline.
  std::size_t Drain();
  void Stop();  // immediate: Drain with no grace and no wait

  struct Parts;

 private:
  explicit Gateway(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace kvroute::gateway
