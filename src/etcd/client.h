// EtcdClient: the few etcd v3 calls kvroute needs, over etcd's JSON gateway (HTTP/1.1 POSTs to
// /v3/...; etcd 3.4 serves it on the client URL) with the project's blocking HTTP client.
// Why the gateway and not gRPC: Debian packages no etcd .proto files and kvroute has no
// HTTP/2 client, while the gateway needs only HTTP/1.1, JSON and base64 (wire.h) — and a
// launcher script can register a worker the same way with curl (docs/etcd.md).
//
//   GrantLease / KeepAliveOnce / RevokeLease   a lease; KeepAliveOnce answers the remaining
//                                              TTL, 0 when the lease is gone (re-register)
//   Put (with a lease) / Delete / RangePrefix  keys; Range answers the revision it read at
//   WatchPrefix(start_revision)                a stream of WatchMessage, one per line
//
// Several endpoints may be given: a call that cannot connect tries the next one, and the one
// that answered is used first afterwards. Every call is bounded (CallTimeouts).
//
// Ownership: owns one BlockingHttpClient (one I/O thread). Thread safety: every method may be
// called from any thread at once; a Watch is read by one thread, Cancel from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/client_types.h"
#include "etcd/wire.h"

namespace kvroute::client {
class BlockingHttpClient;
class BlockingStream;
}  // namespace kvroute::client

namespace kvroute::etcd {

struct Error {
  enum class Kind {
    kUnavailable,  // no endpoint answered (refused, timed out, closed) or a 5xx
    kNotFound,     // etcd said NotFound (gRPC code 5): e.g. the lease does not exist
    kRejected,     // another 4xx: the request was wrong
    kProtocol,     // the answer could not be parsed
    kIdle,         // a watch stream was silent for watch_idle_timeout (re-watch; not a fault)
  };
  Kind kind = Kind::kUnavailable;
  std::string text;
};
template <typename T>
using Result = std::expected<T, Error>;

// "http://127.0.0.1:2379,http://10.0.0.2:2379" (the scheme may be omitted; only http).
std::expected<std::vector<client::Url>, std::string> ParseEndpoints(std::string_view list);

struct ClientOptions {
  std::vector<client::Url> endpoints;  // at least one
  std::chrono::milliseconds connect_timeout{1'000};
  std::chrono::milliseconds call_timeout{3'000};  // a whole unary call
  // A watch with no message for this long is ended with kUnavailable "idle" (the caller
  // re-watches from its last revision): it bounds a half-open connection's silence.
  std::chrono::milliseconds watch_idle_timeout{60'000};
};

class Watch {
 public:
  explicit Watch(std::unique_ptr<client::BlockingStream> stream);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  // The next message (the first is `created`); kUnavailable when the stream ended or broke.
  Result<WatchMessage> Next();
  void Cancel();  // any thread; a blocked Next returns an error

 private:
  std::unique_ptr<client::BlockingStream> stream_;
  std::string buffer_;  // bytes after the last complete line
};

class EtcdClient {
 public:
  explicit EtcdClient(ClientOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  Result<LeaseGrant> GrantLease(std::int64_t ttl_s);
  Result<std::int64_t> KeepAliveOnce(std::int64_t lease);  // remaining TTL; 0 = gone
  Result<void> RevokeLease(std::int64_t lease);
  Result<std::int64_t> Put(std::string_view key, std::string_view value, std::int64_t lease = 0);
  Result<std::int64_t> Delete(std::string_view key, bool prefix = false);  // the revision
  Result<RangeResult> RangePrefix(std::string_view prefix);
  // Drops history before `revision` (an operator's or etcd's auto-compaction; tests use it).
  Result<void> Compact(std::int64_t revision);
  // Events of keys under `prefix` from `start_revision` (0: from now).
  Result<std::unique_ptr<Watch>> WatchPrefix(std::string_view prefix, std::int64_t start_revision);

  // For logs: the endpoint tried first now.
  std::string CurrentEndpoint() const;

 private:
  Result<std::string> Call(std::string_view path, std::string body);
  client::ClientRequest RequestTo(const client::Url& url, std::string_view path,
                                  std::string body) const;

  const ClientOptions options_;
  std::unique_ptr<client::BlockingHttpClient> http_;
  std::atomic<std::size_t> preferred_{0};  // index into options_.endpoints
};

std::string_view ErrorKindName(Error::Kind kind);

}  // namespace kvroute::etcd
