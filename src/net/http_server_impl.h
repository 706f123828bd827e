// The internals of net::HttpServer, shared by its implementation files: http_server.cc (the
// listener, dispatch, lifecycle) and http_session.cc (one connection). Asio and Beast are
// included here and in those files only; nothing outside src/net includes this header.
//
// Thread safety: per member group below, and the contract in http_server.h.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "net/http_server.h"
#include "net/lane_pool.h"

namespace kvroute::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
// A connection runs on one lane: a single-threaded io_context, so it needs no strand.
using Executor = asio::io_context::executor_type;
inline constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);
using RequestParser = http::request_parser<http::string_body>;

// The server's own error answers (http_errors.cc), in the OpenAI error shape every kvroute
// endpoint uses. `message` is ours (fixed text or Beast's parse-error name): nothing of the
// request leaks.
HttpResponse ErrorJson(int status, std::string_view type, std::string_view message);

// What a failed read of a request (header or body) is answered with before the connection
// closes; nullopt: nothing (the client went away, timed out, or the server closed it).
//   body_limit     413
//   header_limit   431
//   other parse errors (malformed start line or field, bad chunk, and request smuggling:
//   Content-Length together with Transfer-Encoding, or conflicting copies of either) 400
std::optional<HttpResponse> ReadErrorAnswer(const beast::error_code& ec,
                                            const RequestParser& parser);

// The framing rules Beast's parser lets through (RFC 9112 section 6.1), checked on a header
// Beast accepted: a Transfer-Encoding with a Content-Length, or any Transfer-Encoding but a
// single `chunked`, is a 400. nullopt: the framing is sound.
std::optional<HttpResponse> FramingAnswer(const RequestParser& parser);

class HttpServer::Impl {
 public:
  class Session;

  explicit Impl(ServerOptions options)
      : options_(std::move(options)),
        owns_lanes_(options_.lanes == nullptr),
        lanes_(owns_lanes_ ? std::make_shared<LanePool>(options_.threads) : options_.lanes),
        accept_exec_(lanes_->context(0).get_executor()),
        acceptor_(lanes_->context(0)) {}

  // Constant after Start().
  ServerOptions options_;
  std::map<std::string, std::map<std::string, Handler>> routes_;  // path → method → handler
  std::uint16_t port_ = 0;

  // The lanes connections run on: the server's own (options_.threads of them, stopped by
  // Shutdown) or the caller's (options_.lanes, shared with the proxy; left running).
  const bool owns_lanes_;
  std::shared_ptr<LanePool> lanes_;
  // An Asio acceptor is not thread-safe: after Start it is touched only on lane 0 (AcceptLoop
  // runs there, StopAccepting's close is posted there). With the loop on a multi-threaded
  // io_context, a close on one thread raced the loop's async_accept on another and crashed
  // in the reactor (null descriptor state) when Shutdown came right after Start.
  Executor accept_exec_;
  tcp::acceptor acceptor_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};

  // Serialises Start, StopAccepting and Shutdown: two Shutdowns at once would reset the
  // work guard and join the same threads together.
  std::mutex lifecycle_mu_;

  // Guarded by mu_.
  std::mutex mu_;
  std::condition_variable cv_;  // in_flight_, sessions_ or accept_loop_running_ changed
  std::size_t in_flight_ = 0;
  std::uint64_t next_session_id_ = 0;
  std::unordered_map<std::uint64_t, std::weak_ptr<Session>> sessions_;
  bool accept_loop_running_ = false;

  asio::awaitable<void> AcceptLoop();
  // REQUIRE: lifecycle_mu_ held.
  void StopAcceptingLocked();
  HandlerResult Dispatch(HttpRequest&& request) const;
  void RequestStarted() {
    std::lock_guard lock(mu_);
    ++in_flight_;
  }
  void RequestFinished() {
    std::lock_guard lock(mu_);
    --in_flight_;
    cv_.notify_all();
  }
  // Runs fn(session) on each live session's lane.
  template <typename Fn>
  void ForEachSession(Fn fn);
};

// One connection. Its coroutines (Run and, while an answer is pending, Watch) run on its lane;
// every member below is touched only there.
class HttpServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Impl* server, tcp::socket socket, int lane, Executor exec, std::uint64_t id)
      : server_(server),
        lane_(lane),
        exec_(exec),
        stream_(std::move(socket)),
        watch_done_(exec_),
        id_(id) {}

  asio::awaitable<void> Run();
  // Posted by StopAccepting: a connection between requests is closed now.
  void CloseIfIdle() {
    if (idle_) Close();
  }
  // Posted by Shutdown at the deadline: cancel the pending answer and drop the connection.
  void Cut() {
    if (!busy_) return Close();
    cut_ = true;
    CancelAnswer();
    Close();
  }
  const Executor& executor() const { return exec_; }
  std::uint64_t id() const { return id_; }

 private:
  asio::awaitable<bool> Serve(http::request_parser<http::string_body>& parser);
  asio::awaitable<bool> WriteFull(const HttpResponse& response, unsigned version, bool keep_alive);
  asio::awaitable<bool> WriteStream(const HttpResponse& response, unsigned version,
                                    bool keep_alive);
  template <typename Buffers>
  asio::awaitable<bool> WriteNow(Buffers buffers);
  asio::awaitable<void> Linger();
  asio::awaitable<void> Watch();
  asio::awaitable<void> StopWatching();
  void StartWatching();
  void CancelAnswer() {
    if (active_stream_) active_stream_->Cancel();
    if (active_deferred_) active_deferred_->Cancel();
  }
  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  // Outlives every session: Shutdown waits for them, and when it gives up on one it keeps
  // the server's state alive for the process's life (HttpServer::KeepForever).
  Impl* server_;
  const int lane_;
  Executor exec_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  asio::steady_timer watch_done_;  // signalled when Watch ends
  std::array<char, 1024> watch_buf_{};
  std::uint64_t id_;
  bool idle_ = false;      // waiting for the next request's header
  bool busy_ = false;      // a request is being answered
  bool watching_ = false;  // Watch is running
  bool cut_ = false;
  std::shared_ptr<BodySource> active_stream_;
  std::shared_ptr<DeferredResponse> active_deferred_;
};

}  // namespace kvroute::net
