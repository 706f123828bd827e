// ListWatchLoop: the Kubernetes list + watch choreography shared by every watcher in this
// module (the pool's pods or EndpointSlices: pool_watcher.h; InferenceObjectives and
// InferenceModelRewrites: objective_watcher.h). List the collection into a WatchReconciler,
// watch from the list's resourceVersion (allowWatchBookmarks), resume a watch that ends or
// drops from the last resourceVersion seen (events and bookmarks move it), list again on 410
// Gone (the HTTP status, or an ERROR event in the stream), and back off (doubling from
// min_backoff to max_backoff) after any other failure. Internal to src/k8s/.
//
// Thread safety: Run and the helpers on the loop's own thread; Stop from any thread (it
// cancels the open watch; a request in progress is bounded by the client's timeouts).
#pragma once

#include <chrono>
#include <condition_variable>
#include <expected>
#include <functional>
#include <mutex>
#include <string>

#include "k8s/api_client.h"
#include "k8s/pool_discovery.h"

namespace kvroute::k8s {

// Query-value encoding (RFC 3986 unreserved characters pass).
std::string UrlEncode(std::string_view s);

struct ListWatchOptions {
  int watch_timeout_s = 300;  // timeoutSeconds of each watch; it is then resumed
  std::chrono::milliseconds min_backoff{200};
  std::chrono::milliseconds max_backoff{5'000};
  // Non-zero: a list answered 404 (the resource type is not served: a CRD not installed)
  // empties the reconciler (what was there is gone) and waits this long before asking again.
  // Zero: a 404 is a failure like any other.
  std::chrono::milliseconds not_found_backoff{0};
  // Each step ("list rv=…", "watch rv=…", "gone", "dropped", errors), `failed` for a request
  // that did not get its answer.
  std::function<void(const std::string& step, bool failed)> on_step;
};

class ListWatchLoop {
 public:
  // `api` is borrowed and used only from the loop's thread.
  ListWatchLoop(ApiClient* api, ListWatchOptions options) : api_(api), options_(std::move(options)) {}

  // Lists `collection` (a path with its query) into `rec`, then watches it, until Stop().
  void Run(WatchReconciler& rec, const std::string& collection);

  // GET `target`: the body of a 200, else an error naming the status (404 → `*not_found`).
  std::expected<std::string, std::string> Get(const std::string& target, bool* not_found = nullptr);
  // Sleeps `d` unless stopped; false when stopped.
  bool Wait(std::chrono::milliseconds d);
  bool Stopped();
  void Stop();

  void Step(const std::string& s) const {
    if (options_.on_step) options_.on_step(s, false);
  }
  void Failure(const std::string& s) const {
    if (options_.on_step) options_.on_step(s, true);
  }
  // The next failure's wait (doubling), and the reset after a success.
  std::chrono::milliseconds NextBackoff();
  void ResetBackoff() { backoff_ = options_.min_backoff; }

 private:
  enum class WatchEnd { kResume, kRelist, kFailed };
  WatchEnd Watch(WatchReconciler& rec, const std::string& collection);

  ApiClient* api_;
  const ListWatchOptions options_;
  std::chrono::milliseconds backoff_{options_.min_backoff};  // loop thread only
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                // guarded by mu_
  ApiStream* open_stream_ = nullptr;  // guarded by mu_: cancelled by Stop
};

}  // namespace kvroute::k8s
