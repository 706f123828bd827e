// HttpServer implementation: Beast on Asio coroutines. See http_server.h for the contract and
// README.md for the connection state machine.
#include "net/http_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "net/lane_pool.h"

namespace kvroute::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
// A connection runs on one lane: a single-threaded io_context, so it needs no strand.
using Executor = asio::io_context::executor_type;
constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);

// Awaitable adapters from the callback interfaces of http_types.h. The callback may run on
// any thread, or inline inside Pull/Wait; the completion is posted to the connection's lane
// (Asio forbids completing inside the initiating call). Posted from the lane's own thread —
// a producer sharing the lane, like the gateway's proxy — it is a push onto the lane's
// private queue: no lock, no wake-up.
template <typename Token>
auto AsyncPull(std::shared_ptr<BodySource> source, Executor exec, Token&& token) {
  return asio::async_initiate<Token, void(std::optional<std::string>)>(
      [source, exec](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        source->Pull([h, exec](std::optional<std::string> piece) {
          asio::post(exec, [h, piece = std::move(piece)]() mutable { (*h)(std::move(piece)); });
        });
      },
      token);
}

template <typename Token>
auto AsyncWait(std::shared_ptr<DeferredResponse> deferred, Executor exec, Token&& token) {
  return asio::async_initiate<Token, void(HttpResponse)>(
      [deferred, exec](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        deferred->Wait([h, exec](HttpResponse response) {
          asio::post(exec,
                     [h, response = std::move(response)]() mutable { (*h)(std::move(response)); });
        });
      },
      token);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

constexpr std::string_view kAmbiguousFraming =
    "Bad Request: a request must not carry both Content-Length and Transfer-Encoding (nor "
    "conflicting copies of either)";

// The server's own error answers, in the OpenAI error shape every kvroute endpoint uses.
// `message` is ours (fixed text or Beast's parse-error name): nothing of the request leaks.
HttpResponse ErrorJson(int status, std::string_view type, std::string_view message) {
  std::string body = R"({"error":{"message":")";
  for (char c : message) {
    if (c == '"' || c == '\\') body += '\\';
    body += c;
  }
  body += R"(","type":")" + std::string(type) + R"(","param":null,"code":)" +
          std::to_string(status) + "}}";
  return JsonResponse(status, std::move(body));
}

// What a failed read of a request (header or body) is answered with before the connection
// closes; nullopt: nothing (the client went away, timed out, or the server closed it).
//   body_limit     413
//   header_limit   431
//   other parse errors (malformed start line or field, bad chunk, and request smuggling:
//   Content-Length together with Transfer-Encoding, or a duplicate of either) 400
// A request whose framing is ambiguous is never served: a proxy in front may have framed it
// differently (RFC 9112 section 6.3), so the connection is not reused either.
std::optional<HttpResponse> ReadErrorAnswer(const beast::error_code& ec,
                                            const http::request_parser<http::string_body>& parser) {
  if (ec.category() != http::make_error_code(http::error::end_of_stream).category()) {
    return std::nullopt;
  }
  switch (static_cast<http::error>(ec.value())) {
    case http::error::end_of_stream:
    case http::error::partial_message:
    case http::error::short_read:
      return std::nullopt;
    case http::error::body_limit:
      return ErrorJson(413, "BadRequestError", "request body too large");
    case http::error::header_limit:
      return ErrorJson(431, "BadRequestError", "request header too large");
    case http::error::bad_content_length:
    case http::error::bad_transfer_encoding: {
      // Beast stops at the second framing field, so the first one is in the message.
      const auto& fields = parser.get();
      if (fields.count(http::field::content_length) > 0 ||
          fields.count(http::field::transfer_encoding) > 0) {
        return ErrorJson(400, "BadRequestError", kAmbiguousFraming);
      }
      [[fallthrough]];
    }
    default:
      return ErrorJson(400, "BadRequestError", "Bad Request: " + ec.message());
  }
}

// The framing rules Beast's parser lets through (RFC 9112 section 6.1): it reads a request
// with `Transfer-Encoding: gzip` and a Content-Length by the Content-Length, and one with
// `Transfer-Encoding: chunked, chunked` or two Transfer-Encoding fields as it sees fit, where
// a proxy in front may have read the same bytes as two requests. Only a single `chunked` is
// accepted; anything else with a Transfer-Encoding is a 400. nullopt: the framing is sound.
std::optional<HttpResponse> FramingAnswer(const http::request_parser<http::string_body>& parser) {
  const auto& fields = parser.get();
  const std::size_t te = fields.count(http::field::transfer_encoding);
  if (te == 0) return std::nullopt;
  if (fields.count(http::field::content_length) > 0) {
    return ErrorJson(400, "BadRequestError", kAmbiguousFraming);
  }
  std::string_view value = fields[http::field::transfer_encoding];
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (te > 1 || !beast::iequals(value, "chunked")) {
    return ErrorJson(400, "BadRequestError",
                     "Bad Request: the only Transfer-Encoding accepted is a single chunked");
  }
  return std::nullopt;
}

}  // namespace

// The states of servers whose Shutdown gave up on a connection (see Shutdown). Reachable from
// a global, so LeakSanitizer does not report them.
void HttpServer::KeepForever(std::shared_ptr<Impl> impl) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<Impl>>();
  std::lock_guard lock(mu);
  kept->push_back(std::move(impl));
}

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

  Impl* server_;  // outlives every session (Shutdown waits for them)
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

asio::awaitable<void> HttpServer::Impl::Session::Run() {
  const ServerOptions& opt = server_->options_;
  beast::error_code nbec;
  stream_.socket().non_blocking(true, nbec);  // for WriteNow; async operations are unaffected
  for (;;) {
    if (server_->draining_) break;
    http::request_parser<http::string_body> parser;
    parser.body_limit(opt.body_limit);
    parser.header_limit(64 * 1024);
    idle_ = true;
    stream_.expires_after(opt.idle_timeout);
    auto [hec, hn] = co_await http::async_read_header(stream_, buffer_, parser, kNoThrow);
    idle_ = false;
    // EOF, idle timeout, closed at drain: nothing to say. Malformed or ambiguously framed:
    // an error answer, and the connection closes (its next bytes cannot be trusted).
    std::optional<HttpResponse> refusal =
        hec ? ReadErrorAnswer(hec, parser) : FramingAnswer(parser);
    if (refusal) {
      server_->RequestStarted();
      co_await WriteFull(*refusal, hec ? 11 : parser.get().version(), false);
      server_->RequestFinished();
      co_await Linger();
      break;
    }
    if (hec) break;
    server_->RequestStarted();
    bool keep_going = co_await Serve(parser);
    server_->RequestFinished();
    if (!keep_going) break;
  }
  Close();
}

// Reads the body, runs the handler and writes its answer. Returns whether the connection
// can take another request.
asio::awaitable<bool> HttpServer::Impl::Session::Serve(
    http::request_parser<http::string_body>& parser) {
  const ServerOptions& opt = server_->options_;
  busy_ = true;
  struct BusyReset {
    Session* s;
    ~BusyReset() {
      s->busy_ = false;
      s->active_stream_.reset();
      s->active_deferred_.reset();
    }
  } busy_reset{this};

  unsigned version = parser.get().version();
  if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
    http::response<http::empty_body> cont{http::status::continue_, version};
    stream_.expires_after(opt.write_timeout);
    auto [cec, cn] = co_await http::async_write(stream_, cont, kNoThrow);
    if (cec) co_return false;
  }
  stream_.expires_after(opt.read_timeout);
  auto [ec, n] = co_await http::async_read(stream_, buffer_, parser, kNoThrow);
  if (ec) {
    if (auto answer = ReadErrorAnswer(ec, parser)) {
      co_await WriteFull(*answer, version, false);
      co_await Linger();
    }
    co_return false;
  }
  stream_.expires_never();

  const auto& msg = parser.get();
  bool keep_alive = msg.keep_alive();
  if (server_->draining_) {
    co_await WriteFull(TextResponse(503, "server is shutting down\n"), version, false);
    co_return false;
  }

  HttpRequest request;
  request.method = std::string(msg.method_string());
  request.target = std::string(msg.target());
  request.path = request.target.substr(0, request.target.find('?'));
  for (const auto& field : msg) {
    request.headers.emplace_back(Lower(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(parser.get().body());
  request.lane = lane_;
  beast::error_code rec;
  auto remote = stream_.socket().remote_endpoint(rec);
  if (!rec) request.remote = remote.address().to_string() + ":" + std::to_string(remote.port());

  HandlerResult result = server_->Dispatch(std::move(request));
  if (auto* deferred = std::get_if<std::shared_ptr<DeferredResponse>>(&result)) {
    active_deferred_ = *deferred;
    StartWatching();
    HttpResponse response = co_await AsyncWait(active_deferred_, exec_, asio::use_awaitable);
    active_deferred_.reset();
    if (cut_) {
      co_await StopWatching();
      co_return false;
    }
    result = std::move(response);
  }
  auto& response = std::get<HttpResponse>(result);
  bool ok;
  if (response.stream) {
    active_stream_ = response.stream;
    if (!watching_) StartWatching();
    ok = co_await WriteStream(response, version, keep_alive);
  } else {
    ok = co_await WriteFull(response, version, keep_alive);
  }
  co_await StopWatching();
  co_return ok&& keep_alive && !cut_ && !server_->draining_;
}

asio::awaitable<bool> HttpServer::Impl::Session::WriteFull(const HttpResponse& response,
                                                           unsigned version, bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(response.status), version};
  res.set(http::field::server, server_->options_.server_name);
  res.set(http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) res.insert(name, value);
  res.keep_alive(keep_alive && !server_->draining_);
  res.body() = response.body;
  res.prepare_payload();
  stream_.expires_after(server_->options_.write_timeout);
  auto [ec, n] = co_await http::async_write(stream_, res, kNoThrow);
  stream_.expires_never();
  co_return !ec;
}

// One piece of a stream. The socket is non-blocking: what the send buffer takes at once
// (usually everything) is written inline, without arming the write timer or a trip through
// the scheduler; only a rest the client has not made room for is awaited, under
// write_timeout.
template <typename Buffers>
asio::awaitable<bool> HttpServer::Impl::Session::WriteNow(Buffers buffers) {
  beast::error_code ec;
  std::size_t n = stream_.socket().write_some(buffers, ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    ec = {};
    n = 0;
  }
  if (ec) co_return false;
  if (n == beast::buffer_bytes(buffers)) co_return true;
  beast::buffers_suffix<Buffers> rest(buffers);
  rest.consume(n);
  stream_.expires_after(server_->options_.write_timeout);
  auto [wec, wn] = co_await asio::async_write(stream_, rest, kNoThrow);
  stream_.expires_never();
  co_return !wec;
}

asio::awaitable<bool> HttpServer::Impl::Session::WriteStream(const HttpResponse& response,
                                                             unsigned version, bool keep_alive) {
  const ServerOptions& opt = server_->options_;
  http::response<http::empty_body> res{static_cast<http::status>(response.status), version};
  res.set(http::field::server, opt.server_name);
  res.set(http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) res.insert(name, value);
  res.keep_alive(keep_alive);
  res.chunked(true);
  http::response_serializer<http::empty_body> sr{res};
  stream_.expires_after(opt.write_timeout);
  auto [hec, hn] = co_await http::async_write_header(stream_, sr, kNoThrow);
  stream_.expires_never();
  if (hec) {
    active_stream_->Cancel();
    co_return false;
  }
  for (;;) {
    std::optional<std::string> piece =
        co_await AsyncPull(active_stream_, exec_, asio::use_awaitable);
    if (!piece) break;
    if (piece->empty()) continue;  // an empty chunk would end the body
    if (!co_await WriteNow(http::make_chunk(asio::buffer(*piece)))) {
      active_stream_->Cancel();
      co_return false;
    }
  }
  if (cut_) co_return false;  // no last chunk: the client sees the body cut short
  stream_.expires_after(opt.write_timeout);
  auto [lec, ln] = co_await asio::async_write(stream_, http::make_chunk_last(), kNoThrow);
  stream_.expires_never();
  co_return !lec;
}

// After an error answer the connection is closed with the client's bytes possibly still
// unread (a body we refused, the rest of a malformed request). Closing a socket with unread
// data sends a reset, and the client's kernel may drop our answer before the client reads
// it. So: stop sending (FIN after the answer), read and discard until the client closes, for
// at most kLingerTime (nginx's lingering_close). Shutdown's Cut ends it early (not busy_).
asio::awaitable<void> HttpServer::Impl::Session::Linger() {
  constexpr std::chrono::seconds kLingerTime{2};
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  stream_.expires_after(kLingerTime);
  for (;;) {
    auto [rec, rn] = co_await stream_.async_read_some(asio::buffer(watch_buf_), kNoThrow);
    if (rec) break;
  }
  stream_.expires_never();
}

// While an answer is pending, a read on the socket tells us when the client goes away (EOF
// or reset); HTTP clients send nothing while they wait for a response. Bytes that do arrive
// are a pipelined next request: they are kept for the next read.
void HttpServer::Impl::Session::StartWatching() {
  watching_ = true;
  watch_done_.expires_at(asio::steady_timer::time_point::max());
  asio::co_spawn(
      exec_, [self = shared_from_this()]() { return self->Watch(); }, asio::detached);
}

asio::awaitable<void> HttpServer::Impl::Session::Watch() {
  auto [ec, n] = co_await stream_.socket().async_read_some(asio::buffer(watch_buf_), kNoThrow);
  if (!ec && n > 0) {
    auto dst = buffer_.prepare(n);
    std::memcpy(dst.data(), watch_buf_.data(), n);
    buffer_.commit(n);
  } else if (ec != asio::error::operation_aborted) {
    CancelAnswer();  // the client went away
  }
  watching_ = false;
  watch_done_.cancel();
}

asio::awaitable<void> HttpServer::Impl::Session::StopWatching() {
  if (!watching_) co_return;
  beast::error_code ec;
  stream_.socket().cancel(ec);
  while (watching_) {
    co_await watch_done_.async_wait(kNoThrow);
  }
}

asio::awaitable<void> HttpServer::Impl::AcceptLoop() {
  Impl* self = this;
  for (;;) {
    // Connections are spread over the lanes round robin; each stays on its lane for life.
    const int lane = lanes_->NextLane();
    Executor exec = lanes_->context(lane).get_executor();
    auto [ec, socket] = co_await acceptor_.async_accept(exec, kNoThrow);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      spdlog::warn("http: accept failed: {}", ec.message());
      continue;
    }
    if (draining_) continue;  // socket closes on scope exit
    socket.set_option(tcp::no_delay(true), ec);
    std::shared_ptr<Session> session;
    {
      std::lock_guard lock(mu_);
      std::uint64_t id = next_session_id_++;
      session = std::make_shared<Session>(self, std::move(socket), lane, exec, id);
      sessions_[id] = session;
    }
    asio::co_spawn(session->executor(), session->Run(), [self, session](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          spdlog::warn("http: connection dropped: {}", ex.what());
        }
      }
      std::lock_guard lock(self->mu_);
      self->sessions_.erase(session->id());
      self->cv_.notify_all();
    });
  }
}

// Takes the request by rvalue and passes it on: the handler owns it (no body copy).
HandlerResult HttpServer::Impl::Dispatch(HttpRequest&& request) const {
  auto path_it = routes_.find(request.path);
  if (path_it == routes_.end()) {
    return ErrorJson(404, "NotFoundError", "Not Found");
  }
  auto method_it = path_it->second.find(request.method);
  if (method_it == path_it->second.end()) {
    HttpResponse r = ErrorJson(405, "MethodNotAllowed", "Method Not Allowed");
    std::string allow;
    for (const auto& [method, h] : path_it->second) allow += (allow.empty() ? "" : ", ") + method;
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  try {
    return method_it->second(std::move(request));
  } catch (const std::exception& e) {
    // Handlers must not throw; if one does, only this request fails and nothing leaks. The
    // route's own key names it: the handler may have moved from the request.
    spdlog::error("http: handler for {} {} threw: {}", method_it->first, path_it->first, e.what());
    return ErrorJson(500, "InternalServerError", "Internal Server Error");
  }
}

template <typename Fn>
void HttpServer::Impl::ForEachSession(Fn fn) {
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, weak] : sessions_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) asio::post(s->executor(), [s, fn] { fn(*s); });
}

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}

HttpServer::~HttpServer() { Shutdown(std::chrono::milliseconds(0)); }

void HttpServer::Handle(std::string method, std::string path, Handler handler) {
  impl_->routes_[std::move(path)][std::move(method)] = std::move(handler);
}

std::expected<void, std::string> HttpServer::Start() {
  Impl& s = *impl_;
  std::lock_guard life(s.lifecycle_mu_);
  if (s.started_.exchange(true)) return std::unexpected("server already started");
  beast::error_code ec;
  auto address = asio::ip::make_address(s.options_.host, ec);
  if (ec) {
    s.started_ = false;  // nothing runs: Shutdown has nothing to stop
    return std::unexpected("bad listen address '" + s.options_.host + "': " + ec.message());
  }
  tcp::endpoint endpoint(address, s.options_.port);
  std::string where = s.options_.host + ":" + std::to_string(s.options_.port);
  s.acceptor_.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor_.bind(endpoint, ec);
  if (!ec) s.acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    s.acceptor_.close(ignored);
    s.started_ = false;
    return std::unexpected("cannot listen on " + where + ": " + ec.message());
  }
  s.port_ = s.acceptor_.local_endpoint().port();
  {
    std::lock_guard lock(s.mu_);
    s.accept_loop_running_ = true;
  }
  // Shutdown waits for the loop to end, so that no frame of it is left queued when the
  // threads stop.
  asio::co_spawn(s.accept_exec_, s.AcceptLoop(), [impl = impl_.get()](std::exception_ptr e) {
    if (e) spdlog::error("http: accept loop ended by an exception; no new connections");
    std::lock_guard lock(impl->mu_);
    impl->accept_loop_running_ = false;
    impl->cv_.notify_all();
  });
  return {};
}

std::uint16_t HttpServer::port() const { return impl_->port_; }

void HttpServer::StopAccepting() {
  std::lock_guard life(impl_->lifecycle_mu_);
  impl_->StopAcceptingLocked();
}

void HttpServer::Impl::StopAcceptingLocked() {
  if (draining_.exchange(true)) return;
  if (!started_ || stopped_) return;
  // Shared with the posted close: should the wait below give up, a late close still finds
  // its promise. The wait is bounded in case every pool thread is stuck in a handler.
  auto closed = std::make_shared<std::promise<void>>();
  asio::post(accept_exec_, [this, closed] {
    beast::error_code ec;
    acceptor_.close(ec);
    closed->set_value();
  });
  closed->get_future().wait_for(std::chrono::seconds(5));
  // Every session AcceptLoop created is in sessions_ by now: it runs on lane 0, so
  // each of its steps finished before the close ran, and steps after it accept nothing.
  ForEachSession([](Session& session) { session.CloseIfIdle(); });
}

std::size_t HttpServer::Shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  std::lock_guard life(s.lifecycle_mu_);
  if (!s.started_ || s.stopped_.load()) return 0;
  s.StopAcceptingLocked();
  std::size_t cut = 0;
  {
    std::unique_lock lock(s.mu_);
    s.cv_.wait_for(lock, grace, [&s] { return s.in_flight_ == 0; });
    cut = s.in_flight_;
  }
  s.ForEachSession([](Impl::Session& session) { session.Cut(); });
  {
    // Cut connections finish within a few scheduler turns; bounded in case a producer
    // ignores Cancel.
    std::unique_lock lock(s.mu_);
    const bool ended = s.cv_.wait_for(
        lock, s.options_.cut_wait, [&s] { return s.sessions_.empty() && !s.accept_loop_running_; });
    if (!ended) {
      // A connection outlived the wait (its producer ignored Cancel, or its lane is stuck in
      // a handler). It will resume whenever its producer answers: on shared lanes, after this
      // server is gone, reaching this state (heap-use-after-free under ASan when it was
      // freed with the HttpServer). Keep the state for the process's life instead: a
      // bounded leak per such Shutdown, and only when a producer breaks its contract.
      spdlog::error(
          "http: {} connection(s) did not end within {} ms of being cut; keeping "
          "the server's state for them",
          s.sessions_.size(), s.options_.cut_wait.count());
      KeepForever(impl_);
    }
  }
  s.stopped_ = true;
  // Shared lanes keep running for their other users (the proxy); their owner stops them.
  if (s.owns_lanes_) s.lanes_->Stop();
  return cut;
}

std::size_t HttpServer::InFlight() const {
  std::lock_guard lock(impl_->mu_);
  return impl_->in_flight_;
}

}  // namespace kvroute::net
