// ObjectiveWatcher: the InferencePool's InferenceObjectives and InferenceModelRewrites followed
// through the Kubernetes API (objective_discovery.h says what is read and how), for kvroute
// serve --epp. For each API group in `groups` (default: `llm-d.ai`, then the former
// `inference.networking.x-k8s.io`) and each kind, a thread lists and watches
// /apis/<group>/v1alpha2/namespaces/<ns>/<plural> with the module's list + watch loop
// (list_watch.h: bookmarks, resume, 410 → relist, backoff) and hands each change to the sink
// as that group's whole set. A group whose CRD is not installed answers 404: that is normal
// (most clusters carry one of the two), its set is empty and it is asked again every
// `not_found_backoff`. Transport, auth and the in-cluster defaults are PoolWatcher's.
// No API server runs where this is tested: tests/integration/k8s replays recorded-shape
// responses from a local fake.
//
// Thread safety: Start/Stop from one thread; the sink is called from the watcher's threads
// (one per group × kind, so it must be thread-safe).
#pragma once

#include <chrono>
#include <expected>
#include <memory>
#include <string>
#include <vector>

#include "k8s/objective_discovery.h"
#include "k8s/pool_watcher.h"

namespace kvroute::k8s {

struct ObjectiveWatcherOptions {
  // api_url, token_file, ca_file, namespace_name, pool_name (poolRef must name it),
  // watch_timeout_s, backoffs, on_step; the pod/slice fields are not used.
  PoolWatcherOptions api;
  std::vector<std::string> groups = {std::string(kLlmdGroup), std::string(kLegacyObjectiveGroup)};
  std::chrono::milliseconds not_found_backoff{30'000};
};

class ObjectiveWatcher {
 public:
  static std::expected<std::unique_ptr<ObjectiveWatcher>, std::string> Start(ObjectiveWatcherOptions options,
                                                                             ServingObjectSink* sink);
  ~ObjectiveWatcher();  // Stop()
  ObjectiveWatcher(const ObjectiveWatcher&) = delete;
  ObjectiveWatcher& operator=(const ObjectiveWatcher&) = delete;

  // Cancels the open watches and joins the threads.
  void Stop();

  struct Impl;

 private:
  explicit ObjectiveWatcher(std::vector<std::unique_ptr<Impl>> impls);
  std::vector<std::unique_ptr<Impl>> impls_;
};

}  // namespace kvroute::k8s
