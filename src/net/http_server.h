// HttpServer: the HTTP/1.1 server of `kvroute sim` and `kvroute serve`.
//
// Asio + Beast with C++20 coroutines on "lanes" (net/lane_pool.h: single-threaded
// io_contexts, one thread each); one coroutine per connection, on the lane it was assigned
// at accept (round robin) for its whole life; keep-alive; per-connection body limit (413); read
// timeout for a request in progress, idle timeout between keep-alive requests, write timeout per
// write. Handlers are looked up by (method, exact path); an unknown path is 404, a known
// path with another method 405. Handlers answer at once, later (DeferredResponse) or as a
// stream (HttpResponse::stream, chunked transfer encoding, one write awaited at a time).
// While a deferred or streamed answer is pending the connection watches its socket, so a
// client that disconnects cancels the answer (BodySource::Cancel → the producer aborts).
//
// Graceful shutdown (vLLM --shutdown-timeout semantics):
//   StopAccepting()  closes the listener; idle keep-alive connections are closed; requests
//                    already being served continue, and further requests on their
//                    connections are refused with 503 + Connection: close.
//   Shutdown(grace)  StopAccepting, waits until no request is in flight or `grace` passed,
//                    then cancels whatever remains (streams are cut, producers cancelled),
//                    stops the threads and joins them.
//
// Beast stays in http_server.cc: this header includes no Asio/Beast.
//
// Ownership: the caller owns the server; handlers are copied into it at registration.
// Thread safety: Handle() only before Start(). Start, StopAccepting, Shutdown, port and
// InFlight may be called from any thread, but not from a handler (Shutdown joins the
// handler threads). Start, StopAccepting and Shutdown are serialised: one called while a
// Shutdown runs returns when that Shutdown has finished (a second Shutdown then returns 0).
// Handlers run concurrently on the lane threads; a handler runs on the lane its request
// names (HttpRequest::lane), the same thread as that connection's socket.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>

#include "net/http_types.h"

namespace kvroute::net {

class LanePool;

struct ServerOptions {
  std::string host = "127.0.0.1";  // address to bind; "0.0.0.0" or "::" for all
  std::uint16_t port = 0;          // 0: the OS picks one (read it back with port())
  int threads = 2;                 // lanes (I/O threads) when `lanes` is not given
  // Lanes shared with other users (the gateway's proxy runs a request's upstream exchange on
  // the lane of its client connection). The server does not stop shared lanes; their owner
  // stops them after the server's Shutdown. Null: the server makes `threads` lanes of its own.
  std::shared_ptr<LanePool> lanes;
  std::size_t body_limit = 16u << 20;  // bytes of request body; larger → 413
  // A request's body must arrive within this once its header was read.
  std::chrono::milliseconds read_timeout{30'000};
  // Waiting for the next request's header (a new or keep-alive connection) ends after this.
  std::chrono::milliseconds idle_timeout{75'000};
  // One write (one response, or one piece of a stream) must be taken by the client within this.
  std::chrono::milliseconds write_timeout{60'000};
  // After Shutdown cuts what remains, how long it waits for the cut connections to end. A
  // connection whose producer ignores Cancel (or whose lane is stuck in a handler) outlives
  // it: Shutdown then returns anyway, logs an error and keeps the server's internal state
  // for the rest of the process (that connection may still resume on a shared lane).
  std::chrono::milliseconds cut_wait{5'000};
  // Value of the Server header.
  std::string server_name = "kvroute";
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();  // Shutdown(0) if still running
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers a handler for an exact path. REQUIRES: before Start().
  void Handle(std::string method, std::string path, Handler handler);

  // Binds, listens and starts the threads. Error text names the address on failure.
  std::expected<void, std::string> Start();

  // The bound port (meaningful after a successful Start).
  std::uint16_t port() const;

  void StopAccepting();

  // Returns the number of requests that were cut at the deadline.
  std::size_t Shutdown(std::chrono::milliseconds grace);

  // Requests received and not yet fully answered.
  std::size_t InFlight() const;

 private:
  class Impl;
  static void KeepForever(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace kvroute::net
