// Vocabulary of the HTTP/1.1 client (client/async_http_client.h, client/blocking_http_client.h):
// requests, buffered responses, timeouts, options and errors as values.
//
// Free of Asio and Beast so that every consumer (gateway proxy, bench runner, tools) compiles
// fast. Header lists reuse net::HeaderList from the server side (net/http_types.h).
//
// Ownership: plain values.
// Thread safety: values are not synchronised.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "net/http_types.h"

namespace kvroute::client {

// Why a request failed. An HTTP error status (4xx, 5xx) is NOT an error: it is a response.
enum class ErrorKind {
  kConnectRefused,    // could not connect: refused, unreachable, name did not resolve
  kConnectTimeout,    // the TCP connect took longer than Timeouts::connect
  kFirstByteTimeout,  // the response headers did not complete within Timeouts::first_byte
  kIdleTimeout,       // no body bytes for Timeouts::idle between two pieces
  kTotalTimeout,      // the whole exchange took longer than Timeouts::total
  kClosedEarly,       // the peer closed or reset the connection before the response ended
  kProtocol,          // malformed response, or a body over the size limit
  kCancelled,         // the caller cancelled (ResponseStream::Cancel)
};

// Stable lower-case names ("connect_refused", ...) for logs, metrics and bench reports.
std::string_view ErrorKindName(ErrorKind kind);

struct ClientError {
  ErrorKind kind = ErrorKind::kProtocol;
  std::string text;  // human-readable detail: the peer, the underlying system error
};

// Every wait of one exchange is bounded. A zero duration means "no limit" for that wait.
struct Timeouts {
  // TCP connect (after name resolution) of a new connection.
  std::chrono::milliseconds connect{5'000};
  // From the end of sending the request to the end of the response headers: the server's
  // queueing + prefill time for an LLM request, so it is generous by default.
  std::chrono::milliseconds first_byte{300'000};
  // Between two body pieces of a response (inter-token gap of a stream).
  std::chrono::milliseconds idle{60'000};
  // The whole exchange, connect to last byte. 0: unlimited.
  std::chrono::milliseconds total{0};
};

struct ClientRequest {
  std::string method = "GET";
  std::string host = "127.0.0.1";  // name or address; "::1" for IPv6 loopback
  std::uint16_t port = 80;
  std::string target = "/";  // path and query
  net::HeaderList headers;   // extra headers; Host, Content-Length, User-Agent are set for you
  std::string body;
  // When set, sent instead of `body`, without a copy: a caller that sends the same bytes
  // several times (the gateway's retries of one request on other workers) shares them.
  std::shared_ptr<const std::string> shared_body;
  std::string content_type;          // sent as Content-Type when non-empty
  std::optional<Timeouts> timeouts;  // overrides ClientOptions::timeouts for this request
};

// Splits "http://host:port/path?q" into host, port (80 by default) and target. Only http://.
struct Url {
  std::string host;
  std::uint16_t port = 80;
  std::string target = "/";
  std::string Origin() const;  // "host:port", the connection pool key
};
std::expected<Url, std::string> ParseUrl(std::string_view url);

// Convenience: a request for `url` with the given method and body.
std::expected<ClientRequest, std::string> MakeRequest(std::string method, std::string_view url,
                                                      std::string body = {},
                                                      std::string content_type = {});

struct ClientResponse {
  int status = 0;
  net::HeaderList headers;  // names lower-cased
  std::string body;

  // First header with this lower-case name, or empty.
  std::string_view Header(std::string_view lower_name) const;
};

struct ClientOptions {
  Timeouts timeouts;
  // Idle keep-alive connections kept per origin (host:port). A connection returned to a full
  // pool is closed. Bounds the file descriptors an idle client holds.
  std::size_t max_idle_per_origin = 64;
  // An idle connection older than this is closed instead of reused: servers close idle
  // keep-alive connections on their own clock (kvroute's after 75 s, nginx's after 75 s,
  // uvicorn's after 5 s), and reusing one that is being closed costs a retry.
  std::chrono::milliseconds idle_expiry{4'000};
  // Largest buffered response body (Send); a stream's pieces are not limited in total.
  std::size_t max_body_bytes = 64u << 20;
  std::string user_agent = "kvroute-client/0.1";
};

}  // namespace kvroute::client
