// Private pieces shared by the three files that implement AsyncHttpClient:
//   async_http_client.cc  the request side: build and write the request, read the headers,
//                         retry a reused connection once; AsyncHttpClient's methods.
//   connection_pool.cc    AsyncHttpClient::Pool: idle connections per origin, Connect.
//   response_stream.cc    ResponseStream and its Impl: the body reads, the idle timer.
// This header includes Beast: include it from those files only, never from a public header
// (async_http_client.h stays Beast-free).
//
// Ownership: a Connection is owned by exactly one place at a time (the pool's idle list, the
// request being sent, or the ResponseStream reading its response), always by unique_ptr.
// Thread safety: Pool is internally locked; Connection and Deadlines are not (one owner).
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "client/async_http_client.h"
#include "client/client_types.h"

namespace kvroute::client {
namespace detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using SteadyTime = std::chrono::steady_clock::time_point;
inline constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);

// The parser that reads a response's headers (and its body, unless chunked).
using ResponseParser = http::response_parser<http::string_body>;

inline std::string OriginOf(const ClientRequest& r) {
  Url u{r.host, r.port, "/"};
  return u.Origin();
}

inline bool IsPeerGone(const beast::error_code& ec) {
  return ec == asio::error::eof || ec == http::error::end_of_stream ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == http::error::partial_message || ec == asio::error::connection_aborted;
}

inline ClientError Error(ErrorKind kind, std::string text) {
  return ClientError{kind, std::move(text)};
}

// The deadlines of one exchange. Each wait runs under min(its own limit, the total deadline);
// when the total deadline is the binding one the error is kTotalTimeout.
class Deadlines {
 public:
  explicit Deadlines(const Timeouts& t) : timeouts_(t) {
    if (t.total.count() > 0) total_ = std::chrono::steady_clock::now() + t.total;
  }
  const Timeouts& timeouts() const { return timeouts_; }
  const std::optional<SteadyTime>& total() const { return total_; }
  // Arms `stream` for one wait of at most `limit` (0: only the total deadline). Returns true
  // when the total deadline is the one that will fire.
  bool Arm(beast::tcp_stream& stream, std::chrono::milliseconds limit) const {
    std::optional<SteadyTime> at;
    bool total_binds = false;
    if (limit.count() > 0) at = std::chrono::steady_clock::now() + limit;
    if (total_ && (!at || *total_ <= *at)) {
      at = total_;
      total_binds = true;
    }
    if (at) {
      stream.expires_at(*at);
    } else {
      stream.expires_never();
    }
    return total_binds;
  }

 private:
  Timeouts timeouts_;
  std::optional<SteadyTime> total_;
};

// One TCP connection, owned by exactly one place at a time: the pool's idle list, a request
// being sent, or the ResponseStream reading its response.
struct Connection {
  // Beast reads at most (capacity - size) bytes per read, 512 for an empty buffer: a streamed
  // response then arrives 512 bytes per read, each a piece for the consumer (a downstream
  // write for the proxy). With room reserved, one read takes everything the server sent
  // since the last one, so several SSE events coalesce into one piece.
  static constexpr std::size_t kReadRoom = 16 * 1024;
  explicit Connection(asio::any_io_executor ex) : stream(std::move(ex)) {
    buffer.reserve(kReadRoom);
  }
  beast::tcp_stream stream;
  beast::flat_buffer buffer;  // bytes read past the previous response (normally none)
  std::string origin;
  SteadyTime idle_since{};
  bool reused = false;  // served at least one earlier response
  void Close() {
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream.socket().close(ec);
  }
};

// Wraps a response whose headers were read on `conn` into the ResponseStream that reads its
// body (response_stream.cc). `body_limit`: the largest body accepted (Send), else none.
std::unique_ptr<ResponseStream> MakeResponseStream(std::shared_ptr<AsyncHttpClient::Pool> pool,
                                                   std::unique_ptr<Connection> conn,
                                                   std::unique_ptr<ResponseParser> parser,
                                                   Deadlines deadlines,
                                                   std::optional<std::uint64_t> body_limit);

}  // namespace detail

// The names the three implementation files (async_http_client.cc, connection_pool.cc,
// response_stream.cc) share, declared once: this header is theirs alone.
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using detail::Connection;
using detail::Deadlines;
using detail::Error;
using detail::IsPeerGone;
using detail::kNoThrow;
using detail::OriginOf;
using detail::SteadyTime;

// The per-origin keep-alive pool (connection_pool.cc). Shared by the client and its streams.
class AsyncHttpClient::Pool {
 public:
  Pool(boost::asio::any_io_executor ex, ClientOptions options)
      : executor_(std::move(ex)), options_(std::move(options)) {}

  const boost::asio::any_io_executor& executor() const { return executor_; }
  const ClientOptions& options() const { return options_; }

  // The most recently used live idle connection to `origin`, or null.
  std::unique_ptr<detail::Connection> TakeIdle(const std::string& origin);
  // Parks a connection whose response was read to its end (the oldest idle one is closed when
  // the origin has more than max_idle_per_origin).
  void Give(std::unique_ptr<detail::Connection> conn);
  void CloseIdle();
  std::size_t IdleCount() const;

  // A new connection to the request's origin, under the connect timeout.
  boost::asio::awaitable<std::expected<std::unique_ptr<detail::Connection>, ClientError>> Connect(
      const ClientRequest& request, const detail::Deadlines& deadlines);

  std::uint64_t opened() const { return opened_.load(std::memory_order_relaxed); }

 private:
  const boost::asio::any_io_executor executor_;
  const ClientOptions options_;
  std::atomic<std::uint64_t> opened_{0};
  mutable std::mutex mu_;
  // Guarded by mu_. Per origin, oldest first.
  std::map<std::string, std::deque<std::unique_ptr<detail::Connection>>> idle_;
};

}  // namespace kvroute::client
