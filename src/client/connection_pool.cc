// AsyncHttpClient::Pool: the idle connections per origin (LIFO reuse, expiry from the oldest)
// and opening new ones. See async_http_client_internal.h and README.md "Connection life cycle".
#include <boost/asio/ip/tcp.hpp>
#include <vector>

#include "client/async_http_client_internal.h"

namespace kvroute::client {

std::unique_ptr<Connection> AsyncHttpClient::Pool::TakeIdle(const std::string& origin) {
  std::unique_ptr<Connection> conn;
  std::vector<std::unique_ptr<Connection>> expired;
  {
    std::lock_guard lock(mu_);
    auto it = idle_.find(origin);
    if (it == idle_.end()) return nullptr;
    auto& list = it->second;
    const auto now = std::chrono::steady_clock::now();
    // Oldest at the front: expire from there, reuse from the back (warmest).
    while (!list.empty() && now - list.front()->idle_since >= options_.idle_expiry) {
      expired.push_back(std::move(list.front()));
      list.pop_front();
    }
    if (!list.empty()) {
      conn = std::move(list.back());
      list.pop_back();
    }
  }
  for (auto& c : expired) c->Close();
  return conn;
}

void AsyncHttpClient::Pool::Give(std::unique_ptr<Connection> conn) {
  conn->idle_since = std::chrono::steady_clock::now();
  conn->reused = true;
  conn->stream.expires_never();
  std::unique_ptr<Connection> evicted;
  {
    std::lock_guard lock(mu_);
    auto& list = idle_[conn->origin];
    list.push_back(std::move(conn));
    if (list.size() > options_.max_idle_per_origin) {
      evicted = std::move(list.front());
      list.pop_front();
    }
  }
  if (evicted) evicted->Close();
}

void AsyncHttpClient::Pool::CloseIdle() {
  std::map<std::string, std::deque<std::unique_ptr<Connection>>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(idle_);
  }
  for (auto& [origin, list] : all) {
    for (auto& c : list) c->Close();
  }
}

std::size_t AsyncHttpClient::Pool::IdleCount() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [origin, list] : idle_) n += list.size();
  return n;
}

asio::awaitable<std::expected<std::unique_ptr<Connection>, ClientError>>
AsyncHttpClient::Pool::Connect(const ClientRequest& request, const Deadlines& deadlines) {
  auto conn = std::make_unique<Connection>(executor_);
  conn->origin = OriginOf(request);
  tcp::resolver resolver(executor_);
  auto [rec, endpoints] =
      co_await resolver.async_resolve(request.host, std::to_string(request.port), kNoThrow);
  if (rec) {
    co_return std::unexpected(
        Error(ErrorKind::kConnectRefused, "resolve " + conn->origin + ": " + rec.message()));
  }
  bool total_binds = deadlines.Arm(conn->stream, deadlines.timeouts().connect);
  auto [cec, ep] = co_await conn->stream.async_connect(endpoints, kNoThrow);
  if (cec == beast::error::timeout) {
    co_return std::unexpected(
        Error(total_binds ? ErrorKind::kTotalTimeout : ErrorKind::kConnectTimeout,
              "connect " + conn->origin + ": timed out"));
  }
  if (cec) {
    co_return std::unexpected(
        Error(ErrorKind::kConnectRefused, "connect " + conn->origin + ": " + cec.message()));
  }
  conn->stream.socket().set_option(tcp::no_delay(true));
  opened_.fetch_add(1, std::memory_order_relaxed);
  co_return conn;
}

}  // namespace kvroute::client
