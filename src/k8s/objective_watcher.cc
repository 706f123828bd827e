#include "k8s/objective_watcher.h"

#include <cstdlib>
#include <thread>

#include "k8s/api_client.h"
#include "k8s/list_watch.h"

namespace kvroute::k8s {

// One collection (group × kind): its client, loop, reconciler and thread.
struct ObjectiveWatcher::Impl {
  std::unique_ptr<ApiClient> api;
  std::unique_ptr<ListWatchLoop> loop;
  std::unique_ptr<ServingObjectReconciler> rec;
  std::string collection;
  std::thread thread;
};

ObjectiveWatcher::ObjectiveWatcher(std::vector<std::unique_ptr<Impl>> impls) : impls_(std::move(impls)) {}
ObjectiveWatcher::~ObjectiveWatcher() { Stop(); }

std::expected<std::unique_ptr<ObjectiveWatcher>, std::string> ObjectiveWatcher::Start(
    ObjectiveWatcherOptions options, ServingObjectSink* sink) {
  PoolWatcherOptions& o = options.api;
  if (auto ok = ApplyInClusterDefaults(&o, [](const char* k) { return std::getenv(k); }); !ok) {
    return std::unexpected("kubernetes api: " + ok.error());
  }
  if (o.namespace_name.empty() || o.pool_name.empty()) {
    return std::unexpected("InferenceObjective discovery needs a namespace and a pool name");
  }
  std::vector<std::unique_ptr<Impl>> impls;
  for (const std::string& group : options.groups) {
    for (ServingKind kind : {ServingKind::kObjective, ServingKind::kModelRewrite}) {
      auto api = ApiClient::Create({.api_url = o.api_url, .ca_file = o.ca_file, .token_file = o.token_file});
      if (!api) return std::unexpected("kubernetes api: " + api.error());
      auto impl = std::make_unique<Impl>();
      impl->api = std::move(*api);
      const std::string plural(PluralOf(kind));
      impl->collection = "/apis/" + group + "/" + std::string(kObjectiveVersion) + "/namespaces/" +
                         o.namespace_name + "/" + plural;
      auto on_step = o.on_step;
      impl->loop = std::make_unique<ListWatchLoop>(
          impl->api.get(),
          ListWatchOptions{.watch_timeout_s = o.watch_timeout_s,
                           .min_backoff = o.min_backoff,
                           .max_backoff = o.max_backoff,
                           .not_found_backoff = options.not_found_backoff,
                           .on_step = [on_step, prefix = plural + "." + group + ": "](const std::string& s, bool failed) {
                             if (on_step) on_step(prefix + s, failed);
                           }});
      impl->rec = std::make_unique<ServingObjectReconciler>(kind, group, o.pool_name, sink);
      impls.push_back(std::move(impl));
    }
  }
  for (auto& impl : impls) {
    Impl* raw = impl.get();
    impl->thread = std::thread([raw] { raw->loop->Run(*raw->rec, raw->collection); });
  }
  return std::unique_ptr<ObjectiveWatcher>(new ObjectiveWatcher(std::move(impls)));
}

void ObjectiveWatcher::Stop() {
  for (auto& impl : impls_) impl->loop->Stop();
  for (auto& impl : impls_) {
    if (impl->thread.joinable()) impl->thread.join();
  }
}

}  // namespace kvroute::k8s
