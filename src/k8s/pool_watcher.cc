#include "k8s/pool_watcher.h"

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "client/blocking_http_client.h"

namespace kvroute::k8s {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

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

std::expected<InClusterConfig, std::string> LoadInClusterConfig(
    const std::function<const char*(const char*)>& getenv, const std::string& dir) {
  const char* host = getenv("KUBERNETES_SERVICE_HOST");
  const char* port = getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    return std::unexpected("not in a cluster: KUBERNETES_SERVICE_HOST/PORT unset");
  }
  InClusterConfig c;
  const std::string h = host;
  c.api_url = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  c.token_file = dir + "/token";
  c.ca_file = dir + "/ca.crt";
  if (!ReadFile(c.token_file)) return std::unexpected("service account token not readable: " + c.token_file);
  if (!ReadFile(c.ca_file)) return std::unexpected("service account CA not readable: " + c.ca_file);
  auto ns = ReadFile(dir + "/namespace");
  if (!ns) return std::unexpected("service account namespace not readable: " + dir + "/namespace");
  c.namespace_name = Trim(*ns);
  return c;
}

struct PoolWatcher::Impl {
  PoolWatcherOptions options;
  MembershipSink* sink = nullptr;
  client::Url api;
  client::BlockingHttpClient http;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;                               // guarded by mu
  client::BlockingStream* open_stream = nullptr;   // guarded by mu: cancelled by Stop

  void Step(const std::string& s) {
    if (options.on_step) options.on_step(s);
  }

  client::ClientRequest Request(const std::string& target, bool watch) const {
    client::ClientRequest r;
    r.host = api.host;
    r.port = api.port;
    r.target = target;
    r.headers.emplace_back("accept", "application/json");
    if (!options.token_file.empty()) {
      if (auto token = ReadFile(options.token_file)) r.headers.emplace_back("authorization", "Bearer " + Trim(*token));
    }
    client::Timeouts t;
    t.connect = std::chrono::milliseconds(5'000);
    t.first_byte = std::chrono::milliseconds(30'000);
    // A watch may be quiet for its whole timeoutSeconds (bookmarks come about once a minute).
    t.idle = watch ? std::chrono::seconds(options.watch_timeout_s + 30) : std::chrono::milliseconds(30'000);
    t.total = watch ? std::chrono::milliseconds(0) : std::chrono::milliseconds(60'000);
    r.timeouts = t;
    return r;
  }

  std::string PodsPath(const PoolSpec& pool) const {
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
    auto r = http.Send(Request(target, false));
    if (!r) return std::unexpected(r.error().text);
    if (r->status != 200) return std::unexpected("HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 200));
    return r->body;
  }

  enum class WatchEnd { kResume, kRelist, kFailed };
  WatchEnd Watch(PoolReconciler& rec) {
    const std::string target = PodsPath(rec.pool()) + "&watch=true&allowWatchBookmarks=true&resourceVersion=" +
                               UrlEncode(rec.resource_version()) +
                               "&timeoutSeconds=" + std::to_string(options.watch_timeout_s);
    Step("watch rv=" + rec.resource_version());
    auto stream = http.Stream(Request(target, true));
    if (!stream) {
      Step("watch failed: " + stream.error().text);
      return WatchEnd::kFailed;
    }
    if ((*stream)->status() == 410) {
      Step("gone (HTTP 410)");
      return WatchEnd::kRelist;
    }
    if ((*stream)->status() != 200) {
      Step("watch failed: HTTP " + std::to_string((*stream)->status()));
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
      auto piece = (*stream)->Next();
      if (!piece || !*piece) {
        Step(piece ? "watch ended" : "dropped: " + piece.error().text);
        break;
      }
      buffer += **piece;
      std::size_t start = 0;
      for (std::size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string_view line(buffer.data() + start, nl - start);
        if (line.empty()) continue;
        PoolReconciler::Event e = rec.ApplyEvent(line);
        if (e == PoolReconciler::Event::kGone) {
          Step("gone (ERROR 410)");
          end = WatchEnd::kRelist;
          more = false;
          break;
        }
        if (e == PoolReconciler::Event::kBookmark) Step("bookmark rv=" + rec.resource_version());
        if (e == PoolReconciler::Event::kError) Step("watch error event");
      }
      buffer.erase(0, start);
    }
    std::lock_guard lock(mu);
    open_stream = nullptr;
    return end;
  }

  void Run() {
    std::optional<PoolReconciler> rec;
    bool need_list = true;
    auto backoff = options.min_backoff;
    while (!Stopped()) {
      if (!rec) {
        auto body = Get("/apis/inference.networking.k8s.io/v1/namespaces/" + options.namespace_name +
                        "/inferencepools/" + options.pool_name);
        auto pool = body ? ParseInferencePool(*body) : std::unexpected(body.error());
        if (!pool) {
          Step("pool error: " + pool.error());
          if (!Wait(backoff)) return;
          backoff = std::min(backoff * 2, options.max_backoff);
          continue;
        }
        std::string ports;
        for (int p : pool->target_ports) ports += (ports.empty() ? "" : ",") + std::to_string(p);
        Step("pool " + pool->name + " selector=" + LabelSelector(pool->selector) + " ports=" + ports +
             " failureMode=" + pool->EffectiveFailureMode() + (pool->failure_mode ? "" : " (unset)"));
        rec.emplace(std::move(*pool), options.models, sink);
      }
      if (need_list) {
        auto body = Get(PodsPath(rec->pool()));
        auto rv = body ? rec->ApplyList(*body) : std::unexpected(body.error());
        if (!rv) {
          Step("list error: " + rv.error());
          if (!Wait(backoff)) return;
          backoff = std::min(backoff * 2, options.max_backoff);
          continue;
        }
        Step("list rv=" + *rv);
        need_list = false;
      }
      switch (Watch(*rec)) {
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
  if (options.api_url.starts_with("https://")) {
    return std::unexpected("kubernetes api " + options.api_url +
                           ": TLS is not built into kvroute's client; reach the API through a "
                           "`kubectl proxy` sidecar (http://127.0.0.1:8001), docs/kubernetes.md");
  }
  auto url = client::ParseUrl(options.api_url);
  if (!url) return std::unexpected("kubernetes api url: " + url.error());
  if (options.namespace_name.empty() || options.pool_name.empty()) {
    return std::unexpected("kubernetes discovery needs a namespace and a pool name");
  }
  if (options.models.empty()) return std::unexpected("kubernetes discovery needs the model name(s) served");
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->sink = sink;
  impl->api = *url;
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
