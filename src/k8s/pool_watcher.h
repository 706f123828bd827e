// PoolWatcher: InferencePool discovery over the Kubernetes API — on its own thread: GET the
// InferencePool, list the pods its selector matches, then watch them from the list's
// resourceVersion (allowWatchBookmarks), feeding a PoolReconciler (pool_discovery.h), which
// calls the MembershipSink. A watch that ends or drops is resumed from the last
// resourceVersion seen (events and bookmarks move it); 410 Gone — as the HTTP status or as an
// ERROR event in the stream — means that history is gone: list again (the reconciler then
// leaves every pod the new list lacks). Other failures retry after a bounded backoff.
//
// Auth: a bearer token read from `token_file` before each request (projected service-account
// tokens rotate); InClusterConfig() reads KUBERNETES_SERVICE_HOST/PORT and the service
// account's token, CA and namespace files. Transport: plain HTTP only — kvroute's client has
// no TLS, so in a cluster the API is reached through a `kubectl proxy` sidecar on loopback
// (docs/kubernetes.md); an https:// api_url is refused at Start with that advice.
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

struct InClusterConfig {
  std::string api_url;    // https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
  std::string token_file;  // <dir>/token
  std::string ca_file;     // <dir>/ca.crt
  std::string namespace_name;  // contents of <dir>/namespace
};
// `getenv` and `dir` (default /var/run/secrets/kubernetes.io/serviceaccount) are injectable
// for tests. Errors say what is missing.
std::expected<InClusterConfig, std::string> LoadInClusterConfig(
    const std::function<const char*(const char*)>& getenv,
    const std::string& dir = "/var/run/secrets/kubernetes.io/serviceaccount");

struct PoolWatcherOptions {
  std::string api_url;        // http://host:port (e.g. kubectl proxy's http://127.0.0.1:8001)
  std::string token_file;     // empty: no Authorization header
  std::string namespace_name;
  std::string pool_name;
  std::vector<std::string> models;  // served by every worker (fleet::WorkerSpec::models)
  int watch_timeout_s = 300;        // timeoutSeconds of each watch; it is then resumed
  std::chrono::milliseconds min_backoff{200};
  std::chrono::milliseconds max_backoff{5'000};
  // Called with each step ("pool …", "list rv=…", "watch rv=…", "gone", "dropped", errors):
  // logs, and the discovery test's evidence of what was requested when.
  std::function<void(const std::string&)> on_step;
};

class PoolWatcher {
 public:
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
