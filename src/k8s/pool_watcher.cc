#include "k8s/pool_watcher.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "k8s/api_client.h"
#include "k8s/slice_discovery.h"
#include "k8s/text_file.h"

namespace kvroute::k8s {
namespace {


// Query-value encoding (RFC 3986 unreserved characters pass).
std::string UrlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

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
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;                               // guarded by mu
  ApiStream* open_stream = nullptr;           // guarded by mu: cancelled by Stop

  void Step(const std::string& s) {
    if (options.on_step) options.on_step(s, false);
  }
  void Failure(const std::string& s) {
    if (options.on_step) options.on_step(s, true);
  }

  // A watch may be quiet for its whole timeoutSeconds (bookmarks come about once a minute).
  std::chrono::milliseconds WatchIdle() const { return std::chrono::seconds(options.watch_timeout_s + 30); }

  // The collection listed and watched: the pool's pods, or its Service's EndpointSlices.
  std::string CollectionPath(const PoolSpec& pool) const {
    if (options.source == DiscoverySource::kEndpointSlices) {
      return "/apis/discovery.k8s.io/v1/namespaces/" + options.namespace_name +
             "/endpointslices?labelSelector=" + UrlEncode(std::string(kServiceNameLabel) + "=" + options.service);
    }
    return "/api/v1/namespaces/" + options.namespace_name + "/pods?labelSelector=" +
           UrlEncode(LabelSelector(pool.selector));
  }

  // Sleeps `d` unless stopped; false when stopped.
  bool Wait(std::chrono::milliseconds d) {
    std::unique_lock lock(mu);
    return !cv.wait_for(lock, d, [this] { return stop; });
  }
  bool Stopped() {
    std::lock_guard lock(mu);
    return stop;
  }

  std::expected<std::string, std::string> Get(const std::string& target) {
    auto r = api->Get(target);
    if (!r) return std::unexpected(r.error());
    if (r->status != 200) return std::unexpected("HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 200));
    return r->body;
  }

  enum class WatchEnd { kResume, kRelist, kFailed };
  WatchEnd Watch(WatchReconciler& rec, const std::string& collection) {
    const std::string target = collection + "&watch=true&allowWatchBookmarks=true&resourceVersion=" +
                               UrlEncode(rec.resource_version()) +
                               "&timeoutSeconds=" + std::to_string(options.watch_timeout_s);
    Step("watch rv=" + rec.resource_version());
    auto stream = api->Watch(target);
    if (!stream) {
      Failure("watch failed: " + stream.error());
      return WatchEnd::kFailed;
    }
    if ((*stream)->status() == 410) {
      Step("gone (HTTP 410)");
      return WatchEnd::kRelist;
    }
    if ((*stream)->status() != 200) {
      Failure("watch failed: HTTP " + std::to_string((*stream)->status()));
      return WatchEnd::kFailed;
    }
    {
      std::lock_guard lock(mu);
      if (stop) return WatchEnd::kFailed;
      open_stream = stream->get();
    }
    std::string buffer;
    WatchEnd end = WatchEnd::kResume;
    for (bool more = true; more;) {
      auto piece = (*stream)->Next(WatchIdle());
      if (!piece || !*piece) {
        Step(piece ? "watch ended" : "dropped: " + piece.error());
        break;
      }
      buffer += **piece;
      std::size_t start = 0;
      for (std::size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string_view line(buffer.data() + start, nl - start);
        if (line.empty()) continue;
        WatchReconciler::Event e = rec.ApplyEvent(line);
        if (e == WatchReconciler::Event::kGone) {
          Step("gone (ERROR 410)");
          end = WatchEnd::kRelist;
          more = false;
          break;
        }
        if (e == WatchReconciler::Event::kBookmark) Step("bookmark rv=" + rec.resource_version());
        if (e == WatchReconciler::Event::kError) Step("watch error event");
      }
      buffer.erase(0, start);
    }
    std::lock_guard lock(mu);
    open_stream = nullptr;
    return end;
  }

  void Run() {
    std::unique_ptr<WatchReconciler> rec;
    std::string collection;
    bool need_list = true;
    auto backoff = options.min_backoff;
    while (!Stopped()) {
      if (!rec) {
        auto body = Get("/apis/inference.networking.k8s.io/v1/namespaces/" + options.namespace_name +
                        "/inferencepools/" + options.pool_name);
        auto pool = body ? ParseInferencePool(*body) : std::unexpected(body.error());
        if (!pool) {
          Failure("pool error: " + pool.error());
          if (!Wait(backoff)) return;
          backoff = std::min(backoff * 2, options.max_backoff);
          continue;
        }
        std::string ports;
        for (int p : pool->target_ports) ports += (ports.empty() ? "" : ",") + std::to_string(p);
        Step("pool " + pool->name + " selector=" + LabelSelector(pool->selector) + " ports=" + ports +
             " failureMode=" + pool->EffectiveFailureMode() + (pool->failure_mode ? "" : " (unset)") +
             (options.source == DiscoverySource::kEndpointSlices ? " from endpointslices of " + options.service : ""));
        collection = CollectionPath(*pool);
        if (options.source == DiscoverySource::kEndpointSlices) {
          rec = std::make_unique<SliceReconciler>(std::move(*pool), options.service, options.models, sink);
        } else {
          rec = std::make_unique<PoolReconciler>(std::move(*pool), options.models, sink);
        }
      }
      if (need_list) {
        auto body = Get(collection);
        auto rv = body ? rec->ApplyList(*body) : std::unexpected(body.error());
        if (!rv) {
          Failure("list error: " + rv.error());
          if (!Wait(backoff)) return;
          backoff = std::min(backoff * 2, options.max_backoff);
          continue;
        }
        Step("list rv=" + *rv);
        need_list = false;
      }
      switch (Watch(*rec, collection)) {
        case WatchEnd::kResume:
          backoff = options.min_backoff;
          break;
        case WatchEnd::kRelist:
          need_list = true;
          backoff = options.min_backoff;
          break;
        case WatchEnd::kFailed:
          if (!Wait(backoff)) return;
          backoff = std::min(backoff * 2, options.max_backoff);
          break;
      }
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
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<PoolWatcher>(new PoolWatcher(std::move(impl)));
}

void PoolWatcher::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
    if (impl_->open_stream) impl_->open_stream->Cancel();
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

}  // namespace kvroute::k8s
