// PoolWatcher: InferencePool discovery over the Kubernetes API — on its own thread: GET the
// InferencePool, list the pods its selector matches (or the EndpointSlices of a Service), then
// watch them from the list's resourceVersion (allowWatchBookmarks), feeding a PoolReconciler
// (pool_discovery.h) or SliceReconciler (slice_discovery.h), which calls the MembershipSink. A watch that ends or drops is resumed from the last
// resourceVersion seen (events and bookmarks move it); 410 Gone — as the HTTP status or as an
// ERROR event in the stream — means that history is gone: list again (the reconciler then
// leaves every pod the new list lacks). Other failures retry after a bounded backoff.
//
// Transport and auth (api_client.h): http:// or https://, the server's certificate verified
// against `ca_file`; a bearer token read from `token_file` before each request (projected
// service-account tokens rotate). In a pod, leave api_url, token_file, ca_file and namespace
// empty and ApplyInClusterDefaults fills them from KUBERNETES_SERVICE_HOST/PORT and the
// service account's files (each one set in the options wins).
// No API server runs where this is tested: tests/integration/k8s replays recorded-shape
// responses from a local fake.
//
// Thread safety: Start/Stop from one thread; the sink is called on the watcher's thread.
#pragma once

#include <chrono>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "k8s/pool_discovery.h"

namespace kvroute::k8s {

// Which collection says who the pool's workers are (slice_discovery.h for the difference).
enum class DiscoverySource {
  kPods,            // the pods the InferencePool's selector matches (list/watch pods)
  kEndpointSlices,  // the EndpointSlices of `service` (list/watch endpointslices)
};

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct PoolWatcherOptions {
  std::string api_url;     // http(s)://host:port; empty: in-cluster (ApplyInClusterDefaults)
  std::string token_file;  // empty: the service account's when in-cluster, else no token
  std::string ca_file;     // https: the PEM CA bundle; empty: the service account's ca.crt
  std::string namespace_name;  // empty: the service account's namespace
  std::string pool_name;
  DiscoverySource source = DiscoverySource::kPods;
  std::string service;  // with kEndpointSlices: the Service whose slices are followed
  std::vector<std::string> models;  // served by every worker (fleet::WorkerSpec::models)
  int watch_timeout_s = 300;        // timeoutSeconds of each watch; it is then resumed
  std::chrono::milliseconds min_backoff{200};
  std::chrono::milliseconds max_backoff{5'000};
  // Called with each step ("pool …", "list rv=…", "watch rv=…", "gone", "dropped", errors),
  // `failed` for a request that did not get its answer (refused TLS, HTTP errors): logs, and
  // the discovery test's evidence of what was requested when.
  std::function<void(const std::string& step, bool failed)> on_step;
};

// The in-cluster defaults, each only where `o` leaves the field empty:
//   api_url     https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (error if unset)
//   token_file  <dir>/token, only when api_url was empty too (a token is never sent to an
//               explicitly configured URL the operator did not pair with one); must be readable
//   ca_file     <dir>/ca.crt when the URL is https; must be readable
//   namespace   the contents of <dir>/namespace (error if unreadable)
// `getenv` and `dir` are injectable for tests. Errors name the missing variable or file.
std::expected<void, std::string> ApplyInClusterDefaults(
    PoolWatcherOptions* o, const std::function<const char*(const char*)>& getenv,
    const std::string& dir = kServiceAccountDir);

class PoolWatcher {
 public:
  // Applies the in-cluster defaults (process environment, kServiceAccountDir), builds the API
  // client (a CA file that cannot be loaded fails here) and starts the thread.
  static std::expected<std::unique_ptr<PoolWatcher>, std::string> Start(PoolWatcherOptions options,
                                                                        MembershipSink* sink);
  ~PoolWatcher();  // Stop()
  PoolWatcher(const PoolWatcher&) = delete;
  PoolWatcher& operator=(const PoolWatcher&) = delete;

  // Cancels the open request and joins the thread (bounded by the client's timeouts).
  void Stop();

  struct Impl;

 private:
  explicit PoolWatcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvroute::k8s
