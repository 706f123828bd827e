// ResponseStream: reads one response's body piece by piece, only when asked (Next / ReadNext),
// under the idle and total limits kept by one timer per stream. See async_http_client.h for
// the contract and README.md "Reading a body" for why it reads the raw socket.
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cctype>

#include "client/async_http_client_internal.h"
#include "client/chunked_decoder.h"

namespace kvroute::client {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

// The reading side of one response. Touched on the client's executor (one thread, or a
// strand): by the consumer's Next()/ReadNext(), the read completions and the idle timer's
// handler. Cancel() only sets an atomic flag and posts the socket close onto the executor.
//
// Body reads go to the raw socket (not through beast::tcp_stream, which arms and cancels its
// timer around every operation) and the bytes are parsed here; the idle and total limits are
// kept by `timer_`, armed once per idle period (see the header).
class ResponseStream::Impl : public std::enable_shared_from_this<ResponseStream::Impl> {
 public:
  using Parser = detail::ResponseParser;

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

namespace detail {

std::unique_ptr<ResponseStream> MakeResponseStream(std::shared_ptr<AsyncHttpClient::Pool> pool,
                                                   std::unique_ptr<Connection> conn,
                                                   std::unique_ptr<ResponseParser> parser,
                                                   Deadlines deadlines,
                                                   std::optional<std::uint64_t> body_limit) {
  auto impl = std::make_shared<ResponseStream::Impl>(std::move(pool), std::move(conn),
                                                     std::move(parser), deadlines, body_limit);
  return std::make_unique<ResponseStream>(std::move(impl));
}

}  // namespace detail
}  // namespace kvroute::client
