#include "k8s/pool_watcher.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "k8s/api_client.h"
#include "k8s/json_read.h"
#include "k8s/list_watch.h"
#include "k8s/pod_kv_events.h"
#include "k8s/slice_discovery.h"
#include "k8s/text_file.h"

namespace kvroute::k8s {

std::expected<void, std::string> ApplyInClusterDefaults(
    PoolWatcherOptions* o, const std::function<const char*(const char*)>& getenv, const std::string& dir) {
  const bool in_cluster = o->api_url.empty();
  if (in_cluster) {
    const char* host = getenv("KUBERNETES_SERVICE_HOST");
    const char* port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) {
      return std::unexpected(
          "no api_url and not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset): set api_url");
    }
    const std::string h = host;
    o->api_url = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  }
  if (in_cluster && o->token_file.empty()) {
    o->token_file = dir + "/token";
    if (!ReadTextFile(o->token_file)) return std::unexpected("service account token not readable: " + o->token_file);
  }
  if (o->api_url.starts_with("https://") && o->ca_file.empty()) {
    o->ca_file = dir + "/ca.crt";
    if (!ReadTextFile(o->ca_file)) return std::unexpected("service account CA not readable: " + o->ca_file);
  }
  if (o->namespace_name.empty()) {
    auto ns = ReadTextFile(dir + "/namespace");
    if (!ns || TrimTrailingSpace(*ns).empty()) {
      return std::unexpected("no namespace given and the service account's is not readable: " + dir + "/namespace");
    }
    o->namespace_name = TrimTrailingSpace(*ns);
  }
  return {};
}

struct PoolWatcher::Impl {
  PoolWatcherOptions options;
  MembershipSink* sink = nullptr;
  std::unique_ptr<ApiClient> api;
  std::unique_ptr<ListWatchLoop> loop;
  std::thread thread;

  // The collection listed and watched: the pool's pods, or its Service's EndpointSlices.
  std::string CollectionPath(const PoolSpec& pool) const {
    if (options.source == DiscoverySource::kEndpointSlices) {
      return "/apis/discovery.k8s.io/v1/namespaces/" + options.namespace_name +
             "/endpointslices?labelSelector=" + UrlEncode(std::string(kServiceNameLabel) + "=" + options.service);
    }
    return "/api/v1/namespaces/" + options.namespace_name + "/pods?labelSelector=" +
           UrlEncode(LabelSelector(pool.selector));
  }

  // A slice endpoint's pod, read for its KV-event endpoint (the slice carries no pod spec).
  // Any failure (RBAC without `get` on pods, the pod gone) only means no events: logged.
  std::optional<fleet::KvEventSource> PodEvents(const std::string& pod) {
    auto body = loop->Get("/api/v1/namespaces/" + options.namespace_name + "/pods/" + UrlEncode(pod));
    if (!body) {
      loop->Failure("pod " + pod + " (for its KV events): " + body.error());
      return std::nullopt;
    }
    auto v = json_read::Parse(*body);
    auto events = v ? PodKvEvents(json_read::Obj(&*v)) : std::nullopt;
    loop->Step("pod " + pod + " kv events " + (events ? events->endpoint : std::string("none")));
    return events;
  }

  // The pool first (its selector and target ports say what to follow), then its collection.
  void Run() {
    std::unique_ptr<WatchReconciler> rec;
    while (!rec) {
      if (loop->Stopped()) return;
      auto body = loop->Get("/apis/inference.networking.k8s.io/v1/namespaces/" + options.namespace_name +
                            "/inferencepools/" + options.pool_name);
      auto pool = body ? ParseInferencePool(*body) : std::unexpected(body.error());
      if (!pool) {
        loop->Failure("pool error: " + pool.error());
        if (!loop->Wait(loop->NextBackoff())) return;
        continue;
      }
      std::string ports;
      for (int p : pool->target_ports) ports += (ports.empty() ? "" : ",") + std::to_string(p);
      loop->Step("pool " + pool->name + " selector=" + LabelSelector(pool->selector) + " ports=" + ports +
                 " failureMode=" + pool->EffectiveFailureMode() + (pool->failure_mode ? "" : " (unset)") +
                 (options.source == DiscoverySource::kEndpointSlices ? " from endpointslices of " + options.service : ""));
      const std::string collection = CollectionPath(*pool);
      if (options.source == DiscoverySource::kEndpointSlices) {
        rec = std::make_unique<SliceReconciler>(std::move(*pool), options.service, options.models, sink,
                                                [this](const std::string& pod) { return PodEvents(pod); });
      } else {
        rec = std::make_unique<PoolReconciler>(std::move(*pool), options.models, sink);
      }
      loop->Run(*rec, collection);
    }
  }
};

PoolWatcher::PoolWatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PoolWatcher::~PoolWatcher() { Stop(); }

std::expected<std::unique_ptr<PoolWatcher>, std::string> PoolWatcher::Start(PoolWatcherOptions options,
                                                                            MembershipSink* sink) {
  if (auto ok = ApplyInClusterDefaults(&options, [](const char* k) { return std::getenv(k); }); !ok) {
    return std::unexpected("kubernetes api: " + ok.error());
  }
  auto api = ApiClient::Create({.api_url = options.api_url, .ca_file = options.ca_file,
                                .token_file = options.token_file});
  if (!api) return std::unexpected("kubernetes api: " + api.error());
  if (options.namespace_name.empty() || options.pool_name.empty()) {
    return std::unexpected("kubernetes discovery needs a namespace and a pool name");
  }
  if (options.models.empty()) return std::unexpected("kubernetes discovery needs the model name(s) served");
  if (options.source == DiscoverySource::kEndpointSlices && options.service.empty()) {
    return std::unexpected("kubernetes discovery from EndpointSlices needs the Service's name");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->sink = sink;
  impl->api = std::move(*api);
  impl->loop = std::make_unique<ListWatchLoop>(
      impl->api.get(), ListWatchOptions{.watch_timeout_s = impl->options.watch_timeout_s,
                                        .min_backoff = impl->options.min_backoff,
                                        .max_backoff = impl->options.max_backoff,
                                        .on_step = impl->options.on_step});
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<PoolWatcher>(new PoolWatcher(std::move(impl)));
}

void PoolWatcher::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->loop->Stop();
  impl_->thread.join();
}

}  // namespace kvroute::k8s
