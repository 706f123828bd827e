// One connection of net::HttpServer: the session coroutine (read, dispatch, answer, keep
// alive), its writes, the watcher that notices a client going away, and the lingering close
// after an error answer. See README.md "One connection" for the state machine.
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cctype>
#include <cstring>

#include "net/http_server_impl.h"

namespace kvroute::net {
namespace {

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

}  // namespace

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

}  // namespace kvroute::net
