// HTTP vocabulary shared by the server (net/http_server.h) and its handlers.
//
// Deliberately free of Asio and Beast so that handler code (api/, sim/, gateway/) compiles
// fast: a handler sees plain strings and two small callback interfaces for answers that are
// not ready when the handler returns.
//
// Ownership: requests and responses are values. A BodySource or DeferredResponse is shared
// (shared_ptr) between the handler's producer side and the connection that consumes it.
//
// Thread safety: values are not synchronised; BodySource/DeferredResponse implementations
// must accept calls from the server's threads while their producer runs on another thread
// (see each interface).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kvroute::net {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // path and query as sent
  std::string path;    // target without the query
  HeaderList headers;  // names lower-cased
  std::string body;
  std::string remote;  // peer address "ip:port", for logs
  // The lane (net::LanePool index) the request's connection runs on, which is also the
  // thread the handler runs on; -1 when unknown (a request built by hand).
  int lane = -1;

  // First header with this (lower-case) name, or empty.
  std::string_view Header(std::string_view lower_name) const;
};

// A response body produced piece by piece (SSE). The server asks for one piece at a time
// and asks again only after the previous piece reached the socket: that is the
// backpressure a slow reader exerts on the producer.
class BodySource {
 public:
  using Deliver = std::function<void(std::optional<std::string>)>;
  virtual ~BodySource() = default;
  // Requests the next piece. `deliver` must be called exactly once, from any thread, with
  // the piece, or with nullopt when the body is complete (or was cancelled). The server
  // never has two Pulls outstanding.
  virtual void Pull(Deliver deliver) = 0;
  // The client disconnected or the server is cutting the request at shutdown. The producer
  // should stop work (abort the engine request); a pending Pull must then be completed with
  // nullopt promptly. May be called from any thread, more than once, and after the end.
  virtual void Cancel() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HeaderList headers;  // extra headers
  std::string body;    // used when `stream` is null
  // When set, the body is sent with chunked transfer encoding from this source and `body`
  // is ignored.
  std::shared_ptr<BodySource> stream;
};

// A response that becomes known later (a non-streaming completion waiting for the engine).
class DeferredResponse {
 public:
  using Done = std::function<void(HttpResponse)>;
  virtual ~DeferredResponse() = default;
  // Called once by the server. `done` must be called exactly once, from any thread.
  virtual void Wait(Done done) = 0;
  // As BodySource::Cancel: a pending Wait must then complete promptly (any response).
  virtual void Cancel() = 0;
};

using HandlerResult = std::variant<HttpResponse, std::shared_ptr<DeferredResponse>>;

// Runs on a server thread: must not block (hand long work to another thread and return a
// DeferredResponse or a streaming HttpResponse).
//
// The request is handed over as an rvalue: the handler owns it and may move from it (the
// proxy moves the body into its exchange instead of copying a possibly multi-MiB string per
// request). A handler that only reads it may still take `const HttpRequest&`.
using Handler = std::function<HandlerResult(HttpRequest&&)>;

// Convenience for handlers.
HttpResponse JsonResponse(int status, std::string body);
HttpResponse TextResponse(int status, std::string body, std::string content_type = "text/plain");

}  // namespace kvroute::net
