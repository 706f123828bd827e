// AsyncHttpClient implementation: Beast parsers on a pooled beast::tcp_stream. See the header
// for the contract and README.md for the connection life cycle.
#include "client/async_http_client.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <deque>
#include <map>
#include <mutex>

#include "client/chunked_decoder.h"

namespace kvroute::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using SteadyTime = std::chrono::steady_clock::time_point;
constexpr auto kNoThrow = asio::as_tuple(asio::use_awaitable);

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string OriginOf(const ClientRequest& r) {
  Url u{r.host, r.port, "/"};
  return u.Origin();
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

bool IsPeerGone(const beast::error_code& ec) {
  return ec == asio::error::eof || ec == http::error::end_of_stream ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == http::error::partial_message || ec == asio::error::connection_aborted;
}

ClientError Error(ErrorKind kind, std::string text) { return ClientError{kind, std::move(text)}; }

}  // namespace

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

class AsyncHttpClient::Pool {
 public:
  Pool(asio::any_io_executor ex, ClientOptions options)
      : executor_(std::move(ex)), options_(std::move(options)) {}

  const asio::any_io_executor& executor() const { return executor_; }
  const ClientOptions& options() const { return options_; }

  // The most recently used live idle connection to `origin`, or null.
  std::unique_ptr<Connection> TakeIdle(const std::string& origin) {
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

  void Give(std::unique_ptr<Connection> conn) {
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

  void CloseIdle() {
    std::map<std::string, std::deque<std::unique_ptr<Connection>>> all;
    {
      std::lock_guard lock(mu_);
      all.swap(idle_);
    }
    for (auto& [origin, list] : all) {
      for (auto& c : list) c->Close();
    }
  }

  std::size_t IdleCount() const {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto& [origin, list] : idle_) n += list.size();
    return n;
  }

  asio::awaitable<std::expected<std::unique_ptr<Connection>, ClientError>> Connect(
      const ClientRequest& request, const Deadlines& deadlines) {
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

  std::uint64_t opened() const { return opened_.load(std::memory_order_relaxed); }

 private:
  const asio::any_io_executor executor_;
  const ClientOptions options_;
  std::atomic<std::uint64_t> opened_{0};
  mutable std::mutex mu_;
  // Guarded by mu_. Per origin, oldest first.
  std::map<std::string, std::deque<std::unique_ptr<Connection>>> idle_;
};

// The reading side of one response. Touched on the client's executor (one thread, or a
// strand): by the consumer's Next()/ReadNext(), the read completions and the idle timer's
// handler. Cancel() only sets an atomic flag and posts the socket close onto the executor.
//
// Body reads go to the raw socket (not through beast::tcp_stream, which arms and cancels its
// timer around every operation) and the bytes are parsed here; the idle and total limits are
// kept by `timer_`, armed once per idle period (see the header).
class ResponseStream::Impl : public std::enable_shared_from_this<ResponseStream::Impl> {
 public:
  using Parser = http::response_parser<http::string_body>;

  Impl(std::shared_ptr<AsyncHttpClient::Pool> pool, std::unique_ptr<Connection> conn,
       std::unique_ptr<Parser> parser, Deadlines deadlines, std::optional<std::uint64_t> body_limit)
      : pool_(std::move(pool)),
        executor_(pool_->executor()),
        conn_(std::move(conn)),
        parser_(std::move(parser)),
        deadlines_(deadlines),
        body_limit_(body_limit),
        timer_(executor_) {
    const auto& msg = parser_->get();
    status_ = static_cast<int>(msg.result_int());
    for (const auto& field : msg) {
      headers_.emplace_back(Lower(field.name_string()), std::string(field.value()));
    }
    // A chunked body (every streamed answer) is decoded here, not by Beast's parser, which
    // spent ~1.2k instructions per chunk; other bodies (Content-Length, close-delimited)
    // stay with the parser.
    if (parser_->chunked() && !parser_->is_done()) chunked_.emplace();
  }
  ~Impl() {
    if (conn_) conn_->Close();  // abandoned before the end: never reused
  }

  int status() const { return status_; }
  const net::HeaderList& headers() const { return headers_; }

  // The result when it is known without reading the socket: an earlier error, a cancel, a
  // piece already parsed, the end of the body. nullopt: a read is needed.
  std::optional<NextResult> Ready() {
    if (error_) return std::unexpected(*error_);
    if (cancelled_.load()) return std::unexpected(Fail(ErrorKind::kCancelled, "cancelled"));
    if (conn_ && conn_->buffer.size() > 0 && !BodyDone()) {
      if (auto bad = ParseBuffered()) return std::unexpected(*bad);
    }
    std::string& body = chunked_ ? chunked_body_ : parser_->get().body();
    if (!body.empty()) {
      std::string piece = std::move(body);
      body.clear();
      if (BodyDone()) Finish();
      return std::optional<std::string>(std::move(piece));
    }
    if (BodyDone()) {
      Finish();
      return std::optional<std::string>();
    }
    if (!conn_) return std::optional<std::string>();
    return std::nullopt;
  }

  void ReadNext(NextCallback done) {
    if (auto ready = Ready()) {
      done(std::move(*ready));
      return;
    }
    StartRead(std::move(done));
  }

  // Next() as an awaitable over the same reads: a read is started only when Ready() had
  // nothing (Asio forbids completing inside the initiating call). A named coroutine taking
  // its owner, and the read's initiation built in a plain function: GCC 12 miscompiled the
  // lambda inside this coroutine's co_await (its capture was re-evaluated on resumption).
  static asio::awaitable<NextResult> Next(std::shared_ptr<Impl> self) {
    if (auto ready = self->Ready()) co_return std::move(*ready);
    NextResult result = co_await self->AsyncRead();
    co_return result;
  }

  void Cancel() {
    if (cancelled_.exchange(true)) return;
    asio::post(executor_, [self = shared_from_this()] {
      if (self->conn_) self->conn_->Close();  // a pending read completes with an error
    });
  }

 private:
  asio::awaitable<NextResult> AsyncRead() {
    return asio::async_initiate<const asio::use_awaitable_t<>&, void(NextResult)>(
        [self = shared_from_this()](auto handler) {
          self->StartRead(
              [h = std::move(handler)](NextResult r) mutable { std::move(h)(std::move(r)); });
        },
        asio::use_awaitable);
  }

  // Reads from the socket until the parser has a piece, the body ends or an error; then
  // calls `done`. Precondition: Ready() returned nullopt (conn_ is set).
  void StartRead(NextCallback done) {
    ArmDeadline();
    // Room as Beast's own read_some takes it: what the buffer has spare (kReadRoom reserved),
    // at least 512 bytes, at most 64 KiB.
    auto dst = conn_->buffer.prepare(beast::read_size(conn_->buffer, 64 * 1024));
    reading_ = true;
    conn_->stream.socket().async_read_some(
        dst, [self = shared_from_this(), done = std::move(done)](const beast::error_code& ec,
                                                                 std::size_t n) mutable {
          self->reading_ = false;
          self->OnRead(ec, n, std::move(done));
        });
  }

  void OnRead(beast::error_code ec, std::size_t n, NextCallback done) {
    if (cancelled_.load()) return done(std::unexpected(Fail(ErrorKind::kCancelled, "cancelled")));
    if (timed_out_) {
      return done(std::unexpected(
          Fail(deadline_is_total_ ? ErrorKind::kTotalTimeout : ErrorKind::kIdleTimeout,
               "no body bytes from " + origin() + " in time")));
    }
    if (ec == asio::error::eof) {
      // The server closed: the body ends here only if the message is delimited by the close
      // (never a chunked one: its end is the last chunk).
      beast::error_code pec;
      if (!chunked_ && parser_->got_some()) parser_->put_eof(pec);
      if (chunked_ || !parser_->got_some() || pec) {
        return done(std::unexpected(
            Fail(ErrorKind::kClosedEarly, origin() + " closed the stream: " + ec.message())));
      }
    } else if (ec && IsPeerGone(ec)) {
      return done(std::unexpected(
          Fail(ErrorKind::kClosedEarly, origin() + " closed the stream: " + ec.message())));
    } else if (ec == asio::error::operation_aborted) {
      return done(std::unexpected(Fail(ErrorKind::kCancelled, "cancelled")));
    } else if (ec) {
      return done(std::unexpected(Fail(ErrorKind::kProtocol, origin() + ": " + ec.message())));
    } else {
      conn_->buffer.commit(n);
    }
    if (auto ready = Ready()) return done(std::move(*ready));
    StartRead(std::move(done));
  }

  // Parses every byte read so far (several chunks coalesce into one piece; the first bytes
  // of a body may have arrived with the headers).
  std::optional<ClientError> ParseBuffered() {
    if (chunked_) {
      const auto data = conn_->buffer.data();
      const std::size_t before = chunked_body_.size();
      const auto r = chunked_->Feed(
          std::string_view(static_cast<const char*>(data.data()), data.size()), &chunked_body_);
      conn_->buffer.consume(r.used);
      if (r.status == ChunkedDecoder::Status::kError) {
        return Fail(ErrorKind::kProtocol, origin() + ": bad chunked encoding");
      }
      body_bytes_ += chunked_body_.size() - before;
      if (body_limit_ && body_bytes_ > *body_limit_) {
        return Fail(ErrorKind::kProtocol, origin() + ": body limit exceeded");
      }
      return std::nullopt;
    }
    while (conn_->buffer.size() > 0 && !parser_->is_done()) {
      beast::error_code ec;
      const std::size_t used = parser_->put(conn_->buffer.data(), ec);
      conn_->buffer.consume(used);
      if (ec == http::error::need_more) break;
      if (ec) return Fail(ErrorKind::kProtocol, origin() + ": " + ec.message());
      if (used == 0) break;
    }
    return std::nullopt;
  }

  // Sets this read's deadline (idle limit from now, capped by the total deadline) and makes
  // sure the timer will look at it: a timer already pending fires at an earlier or equal
  // time (deadlines only move later) and re-arms itself then.
  void ArmDeadline() {
    const auto& t = deadlines_.timeouts();
    const auto total = deadlines_.total();
    std::optional<SteadyTime> at;
    deadline_is_total_ = false;
    if (t.idle.count() > 0) at = std::chrono::steady_clock::now() + t.idle;
    if (total && (!at || *total <= *at)) {
      at = total;
      deadline_is_total_ = true;
    }
    if (!at) return;  // no limit on this read
    deadline_ = *at;
    if (timer_pending_) return;
    StartTimer();
  }

  void StartTimer() {
    timer_pending_ = true;
    timer_.expires_at(deadline_);
    timer_.async_wait([weak = weak_from_this()](const beast::error_code& ec) {
      if (auto self = weak.lock()) self->OnTimer(ec);
    });
  }

  void OnTimer(const beast::error_code& ec) {
    timer_pending_ = false;
    if (ec || !reading_ || !conn_) return;  // no read waiting: the next read re-arms
    if (std::chrono::steady_clock::now() < deadline_) {
      StartTimer();  // the pending read started later than the one the timer was set for
      return;
    }
    timed_out_ = true;
    conn_->Close();  // the pending read completes with an error
  }

  std::string origin() const { return conn_ ? conn_->origin : std::string("peer"); }

  bool BodyDone() const { return chunked_ ? chunked_->done() : parser_->is_done(); }

  ClientError Fail(ErrorKind kind, std::string text) {
    if (!error_) error_ = Error(kind, std::move(text));
    StopTimer();
    if (conn_) {
      conn_->Close();
      conn_.reset();
    }
    return *error_;
  }

  void StopTimer() {
    if (timer_pending_) timer_.cancel();
  }

  // The body ended: the connection is clean and goes back to the pool if both sides agree.
  void Finish() {
    StopTimer();
    if (!conn_) return;
    if (parser_->get().keep_alive() && !cancelled_.load()) {
      pool_->Give(std::move(conn_));
    } else {
      conn_->Close();
      conn_.reset();
    }
  }

  std::shared_ptr<AsyncHttpClient::Pool> pool_;
  asio::any_io_executor executor_;
  std::unique_ptr<Connection> conn_;  // null once given back or closed
  std::unique_ptr<Parser> parser_;
  Deadlines deadlines_;
  const std::optional<std::uint64_t> body_limit_;  // largest body accepted (Send), else none
  std::optional<ChunkedDecoder> chunked_;  // set for a chunked body: it decodes, not parser_
  std::string chunked_body_;               // decoded bytes not yet handed out
  std::uint64_t body_bytes_ = 0;           // decoded so far (chunked)
  asio::steady_timer timer_;               // the read deadline's timer, armed once per idle period
  SteadyTime deadline_{};                  // the pending (or last) read's deadline
  bool deadline_is_total_ = false;         // deadline_ is the total deadline, not the idle one
  bool timer_pending_ = false;             // timer_ has a wait outstanding
  bool reading_ = false;                   // a socket read is outstanding
  bool timed_out_ = false;                 // the timer closed the socket
  int status_ = 0;
  net::HeaderList headers_;
  std::optional<ClientError> error_;
  std::atomic<bool> cancelled_{false};
};

ResponseStream::ResponseStream(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResponseStream::~ResponseStream() = default;
int ResponseStream::status() const { return impl_->status(); }
const net::HeaderList& ResponseStream::headers() const { return impl_->headers(); }
std::string_view ResponseStream::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : impl_->headers()) {
    if (name == lower_name) return value;
  }
  return {};
}
asio::awaitable<ResponseStream::NextResult> ResponseStream::Next() { return Impl::Next(impl_); }
void ResponseStream::ReadNext(NextCallback done) { impl_->ReadNext(std::move(done)); }
void ResponseStream::Cancel() { impl_->Cancel(); }

namespace {

// The request's body is borrowed (span_body), not copied into the message: `r` (the
// OpenStream coroutine's own parameter) outlives every write of it.
using OutgoingRequest = http::request<http::span_body<const char>>;

OutgoingRequest BuildRequest(const ClientRequest& r, const ClientOptions& opt) {
  OutgoingRequest req;
  http::verb verb = http::string_to_verb(r.method);
  if (verb == http::verb::unknown) {
    req.method_string(r.method);
  } else {
    req.method(verb);
  }
  req.target(r.target);
  req.version(11);
  req.set(http::field::host, OriginOf(r));
  req.set(http::field::user_agent, opt.user_agent);
  if (!r.content_type.empty()) req.set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) req.set(name, value);
  req.keep_alive(true);
  const std::string& body = r.shared_body ? *r.shared_body : r.body;
  req.body() = OutgoingRequest::body_type::value_type(body.data(), body.size());
  req.prepare_payload();
  return req;
}

asio::awaitable<std::expected<std::unique_ptr<ResponseStream>, ClientError>> OpenStream(
    std::shared_ptr<AsyncHttpClient::Pool> pool, ClientRequest request,
    std::optional<std::uint64_t> body_limit) {
  const Deadlines deadlines(request.timeouts.value_or(pool->options().timeouts));
  const std::string origin = OriginOf(request);
  auto req = BuildRequest(request, pool->options());
  // A pooled connection may have been closed by the server while idle; such a failure (before
  // any response byte) is retried once on a fresh connection.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<Connection> conn = attempt == 0 ? pool->TakeIdle(origin) : nullptr;
    if (!conn) {
      auto connected = co_await pool->Connect(request, deadlines);
      if (!connected) co_return std::unexpected(connected.error());
      conn = std::move(*connected);
    }
    const bool reused = conn->reused;
    bool total_binds = deadlines.Arm(conn->stream, deadlines.timeouts().first_byte);
    auto [wec, wn] = co_await http::async_write(conn->stream, req, kNoThrow);
    if (wec) {
      conn->Close();
      if (reused && IsPeerGone(wec)) continue;
      if (wec == beast::error::timeout) {
        co_return std::unexpected(
            Error(total_binds ? ErrorKind::kTotalTimeout : ErrorKind::kFirstByteTimeout,
                  "sending to " + origin + " timed out"));
      }
      co_return std::unexpected(
          Error(ErrorKind::kClosedEarly, "sending to " + origin + ": " + wec.message()));
    }
    auto parser = std::make_unique<ResponseStream::Impl::Parser>();
    parser->header_limit(64 * 1024);
    parser->body_limit(body_limit ? boost::optional<std::uint64_t>(*body_limit) : boost::none);
    if (request.method == "HEAD") parser->skip(true);
    total_binds = deadlines.Arm(conn->stream, deadlines.timeouts().first_byte);
    auto [hec, hn] =
        co_await http::async_read_header(conn->stream, conn->buffer, *parser, kNoThrow);
    if (hec) {
      const bool got_nothing = !parser->got_some() && conn->buffer.size() == 0;
      conn->Close();
      if (reused && got_nothing && IsPeerGone(hec)) continue;
      if (hec == beast::error::timeout) {
        co_return std::unexpected(
            Error(total_binds ? ErrorKind::kTotalTimeout : ErrorKind::kFirstByteTimeout,
                  "no response headers from " + origin + " in time"));
      }
      if (IsPeerGone(hec)) {
        co_return std::unexpected(Error(ErrorKind::kClosedEarly,
                                        origin + " closed before the response: " + hec.message()));
      }
      co_return std::unexpected(
          Error(ErrorKind::kProtocol, "bad response from " + origin + ": " + hec.message()));
    }
    auto impl = std::make_shared<ResponseStream::Impl>(pool, std::move(conn), std::move(parser),
                                                       deadlines, body_limit);
    co_return std::make_unique<ResponseStream>(std::move(impl));
  }
  co_return std::unexpected(
      Error(ErrorKind::kClosedEarly, origin + " closed the connection twice before answering"));
}

}  // namespace

AsyncHttpClient::AsyncHttpClient(asio::any_io_executor executor, ClientOptions options)
    : pool_(std::make_shared<Pool>(std::move(executor), std::move(options))) {}

AsyncHttpClient::~AsyncHttpClient() { pool_->CloseIdle(); }

asio::awaitable<std::expected<std::unique_ptr<ResponseStream>, ClientError>>
AsyncHttpClient::Stream(ClientRequest request) {
  return OpenStream(pool_, std::move(request), std::nullopt);
}

asio::awaitable<std::expected<ClientResponse, ClientError>> AsyncHttpClient::Send(
    ClientRequest request) {
  auto stream = co_await OpenStream(pool_, std::move(request), pool_->options().max_body_bytes);
  if (!stream) co_return std::unexpected(stream.error());
  ClientResponse response;
  response.status = (*stream)->status();
  response.headers = (*stream)->headers();
  for (;;) {
    auto piece = co_await (*stream)->Next();
    if (!piece) co_return std::unexpected(piece.error());
    if (!*piece) break;
    response.body += **piece;
  }
  co_return response;
}

void AsyncHttpClient::CloseIdle() { pool_->CloseIdle(); }
std::uint64_t AsyncHttpClient::connections_opened() const { return pool_->opened(); }
std::size_t AsyncHttpClient::idle_connections() const { return pool_->IdleCount(); }

}  // namespace kvroute::client
