// AsyncHttpClient implementation, the request side: build and write the request on a pooled
// (or new) connection, read the response headers, retry once when a reused connection turns
// out closed; the body is then ResponseStream's (response_stream.cc), the pool is
// connection_pool.cc. See the header for the contract and README.md for the life cycle.
#include "client/async_http_client.h"

#include <boost/beast/http.hpp>

#include "client/async_http_client_internal.h"

namespace kvroute::client {
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
    auto parser = std::make_unique<detail::ResponseParser>();
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
    co_return detail::MakeResponseStream(pool, std::move(conn), std::move(parser), deadlines,
                                         body_limit);
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
