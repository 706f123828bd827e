// AsyncHttpClient: an HTTP/1.1 client for C++20 coroutines on Asio, with a keep-alive
// connection pool per origin, streamed responses with backpressure, and timeouts.
//
//   AsyncHttpClient client(executor, options);
//   auto res = co_await client.Send(request);          // buffered: status, headers, body
//   auto stream = co_await client.Stream(request);     // headers now, body piece by piece
//   while (auto piece = co_await (*stream)->Next()) {  // expected<optional<string>>
//     if (!*piece) break;                              // end of body
//     ...                                              // the next read starts only when asked
//   }
//
// Streams. The body is read from the socket only inside Next(): a consumer that does not ask
// stops reading, TCP flow control stops the server (backpressure). A stream that ends
// (Next() returned nullopt) gives its connection back to the pool when the response allowed
// keep-alive. A stream destroyed or Cancel()ed before its end closes its connection: an
// abandoned response leaves unread bytes on it, so it is never reused.
//
// Reuse. A request on a pooled connection that the server had closed meanwhile (EOF or reset
// before any response byte) is retried once on a new connection. Requests are not retried
// otherwise.
//
// Timeouts while reading the body: the idle limit counts only while a read waits (a slow
// consumer between two Next() calls does not time out). It is enforced by one timer per
// stream that is armed once per idle period, not once per piece: each read records its own
// deadline, and the timer, when it fires, either ends a read that is past its deadline or
// re-arms itself for the current one (a relayed token stream at thousands of pieces per
// second would otherwise pay a timer arm + cancel, with the reactor's locks, per piece).
//
// Beast stays in async_http_client.cc (pimpl); this header only pulls in asio::awaitable.
//
// Ownership: the client and its streams share the pool (shared_ptr); a stream may outlive
// the client object. The executor's io_context must outlive both.
// Thread safety: the pool is locked, so one client may be used by coroutines on several
// threads of one io_context. A ResponseStream belongs to one coroutine at a time; only
// Cancel() may be called from elsewhere (any thread).
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "client/client_types.h"

namespace kvroute::client {

class ResponseStream {
 public:
  class Impl;
  // A body piece, nullopt at the end of the body, or an error.
  using NextResult = std::expected<std::optional<std::string>, ClientError>;
  using NextCallback = std::move_only_function<void(NextResult)>;
  explicit ResponseStream(std::shared_ptr<Impl> impl);
  ~ResponseStream();  // closes the connection unless the body was read to its end
  ResponseStream(const ResponseStream&) = delete;
  ResponseStream& operator=(const ResponseStream&) = delete;

  int status() const;
  const net::HeaderList& headers() const;  // names lower-cased
  std::string_view Header(std::string_view lower_name) const;

  // The next body piece (bytes as they arrived: one or more chunks, or part of one; never
  // empty), nullopt at the end of the body, or an error. After an error or the end, every
  // call returns the same.
  boost::asio::awaitable<NextResult> Next();

  // Next() for a consumer driven by callbacks (the gateway's relay): the same result, with no
  // coroutine frame or spawned coroutine per piece. `done` is called exactly once: inline
  // when the result is already known (a piece already parsed, the end, an error), else on
  // the client's executor when the socket read completes. One read at a time, as Next().
  void ReadNext(NextCallback done);

  // Abandons the response: a pending or later Next() fails with kCancelled and the
  // connection is closed. Any thread; idempotent.
  void Cancel();

 private:
  std::shared_ptr<Impl> impl_;
};

class AsyncHttpClient {
 public:
  AsyncHttpClient(boost::asio::any_io_executor executor, ClientOptions options = {});
  ~AsyncHttpClient();
  AsyncHttpClient(const AsyncHttpClient&) = delete;
  AsyncHttpClient& operator=(const AsyncHttpClient&) = delete;

  // Sends `request` and reads the whole response (up to ClientOptions::max_body_bytes).
  boost::asio::awaitable<std::expected<ClientResponse, ClientError>> Send(ClientRequest request);

  // Sends `request` and returns once the response headers arrived.
  boost::asio::awaitable<std::expected<std::unique_ptr<ResponseStream>, ClientError>> Stream(
      ClientRequest request);

  // Closes every idle pooled connection.
  void CloseIdle();

  // Counters for tests and diagnostics.
  std::uint64_t connections_opened() const;
  std::size_t idle_connections() const;

  class Pool;

 private:
  std::shared_ptr<Pool> pool_;
};

}  // namespace kvroute::client
