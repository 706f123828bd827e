#include "gateway/replica_delta_subscriber.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "client/blocking_http_client.h"
#include "client/client_types.h"

namespace kvroute::gateway {

DeltaSubscribers::DeltaSubscribers(DeltaSubscriberOptions options, RemoteBookings* remote,
                                   const Clock* clock)
    : options_(std::move(options)),
      remote_(remote),
      clock_(clock),
      http_(std::make_unique<client::BlockingHttpClient>()) {}

DeltaSubscribers::~DeltaSubscribers() { Stop(); }

void DeltaSubscribers::Start() {
  std::lock_guard lock(mu_);
  if (manager_.joinable() || stop_) return;
  manager_ = std::thread([this] { Manage(); });
}

void DeltaSubscribers::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_ && !manager_.joinable()) return;
    stop_ = true;
    for (auto& [url, c] : conns_) {
      std::lock_guard sl(c->mu);
      if (c->stream) c->stream->Cancel();
    }
  }
  cv_.notify_all();
  if (manager_.joinable()) manager_.join();
  std::map<std::string, std::unique_ptr<Conn>> conns;
  {
    std::lock_guard lock(mu_);
    conns.swap(conns_);
  }
  for (auto& [url, c] : conns) {
    if (c->thread.joinable()) c->thread.join();
  }
}

std::size_t DeltaSubscribers::peers() const {
  std::lock_guard lock(mu_);
  return connected_.size();
}

bool DeltaSubscribers::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return stop_; });
}

bool DeltaSubscribers::Listed(const std::string& url) const {
  std::lock_guard lock(mu_);
  return std::find(listed_.begin(), listed_.end(), url) != listed_.end();
}

void DeltaSubscribers::Manage() {
  do {
    std::vector<std::string> urls = options_.list ? options_.list() : std::vector<std::string>{};
    std::vector<std::unique_ptr<Conn>> done;
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
      listed_ = urls;
      // Reap finished connections, then start one for each listed sibling without one.
      for (auto it = conns_.begin(); it != conns_.end();) {
        if (it->second->finished.load()) {
          done.push_back(std::move(it->second));
          it = conns_.erase(it);
        } else {
          ++it;
        }
      }
      for (const std::string& url : urls) {
        if (conns_.contains(url) || self_urls_.contains(url)) continue;
        auto c = std::make_unique<Conn>();
        c->url = url;
        Conn* raw = c.get();
        c->thread = std::thread([this, raw] { Follow(raw); });
        conns_.emplace(url, std::move(c));
      }
    }
    for (auto& c : done) c->thread.join();
    remote_->Expire(clock_->Now());
  } while (SleepFor(options_.round));
}

void DeltaSubscribers::Follow(Conn* conn) {
  auto backoff = options_.min_backoff;
  for (;;) {
    bool self = false, duplicate = false, was_up = false;
    FollowOnce(conn, &self, &duplicate, &was_up);
    if (self) {
      std::lock_guard lock(mu_);
      self_urls_.insert(conn->url);
      break;
    }
    if (was_up) backoff = options_.min_backoff;
    if (!SleepFor(duplicate ? options_.max_backoff : backoff)) break;
    backoff = std::min(backoff * 2, options_.max_backoff);
    if (!Listed(conn->url)) break;  // it left the list: the manager forgets it
  }
  conn->finished = true;
}

void DeltaSubscribers::FollowOnce(Conn* conn, bool* self, bool* duplicate, bool* was_up) {
  auto req = client::MakeRequest("GET", conn->url + "/admin/replica/deltas");
  if (!req) {
    spdlog::warn("replica deltas: {}: {}", conn->url, req.error());
    return;
  }
  if (!options_.api_key.empty()) {
    req->headers.push_back({"Authorization", "Bearer " + options_.api_key});
  }
  req->timeouts = client::Timeouts{.connect = options_.connect_timeout,
                                   .first_byte = options_.connect_timeout,
                                   .idle = options_.idle_timeout,
                                   .total = std::chrono::milliseconds(0)};
  auto opened = http_->Stream(std::move(*req));
  if (!opened) return;  // not up (yet): the caller retries with backoff
  {
    std::lock_guard lock(mu_);
    std::lock_guard sl(conn->mu);
    if (stop_) return;
    conn->stream = std::move(*opened);
  }
  client::BlockingStream* stream = conn->stream.get();
  std::uint64_t instance = 0;
  std::string why = "ended";
  if (stream->status() != 200) {
    spdlog::warn("replica deltas: {} answered {}", conn->url, stream->status());
  } else {
    FrameDecoder decoder;
    std::vector<Delta> deltas;
    for (;;) {
      auto piece = stream->Next();
      if (!piece) {
        why = piece.error().text;
        break;
      }
      if (!*piece) break;
      deltas.clear();
      if (auto ok = decoder.Feed(**piece, &deltas); !ok) {
        why = "malformed: " + ok.error();
        break;
      }
      if (deltas.empty()) continue;
      if (instance == 0) {
        const auto* hello = std::get_if<HelloDelta>(&deltas.front());
        if (hello == nullptr || hello->instance == 0) {
          why = "no hello";
          break;
        }
        if (hello->instance == options_.own_instance) {
          *self = true;
          why = "ourselves";
          break;
        }
        std::lock_guard lock(mu_);
        if (!connected_.insert(hello->instance).second) {
          *duplicate = true;
          why = "already connected under another URL";
          break;
        }
        instance = hello->instance;
        *was_up = true;
        spdlog::info("replica deltas: following {}", conn->url);
      }
      remote_->Apply(instance, deltas, clock_->Now());
      received_.fetch_add(deltas.size());
    }
  }
  if (instance != 0) {
    const std::size_t dropped = remote_->DropSource(instance, clock_->Now());
    {
      std::lock_guard lock(mu_);
      connected_.erase(instance);
    }
    spdlog::info("replica deltas: {} stream {} ({}); dropped its {} booking(s)", conn->url,
                 why == "ended" ? "ended" : "lost", why, dropped);
  }
  std::lock_guard sl(conn->mu);
  conn->stream->Cancel();
  conn->stream.reset();
}

}  // namespace kvroute::gateway
