// Proxy: forwards one prepared request to the worker the pipeline picks and relays the answer,
// with kvroute's retry rules, load accounting and failure semantics.
//
// Life of one request (its I/O on one "lane": a single-threaded io_context with its own
// keep-alive client pool; its CPU work on the compute pool):
//   0. Handle (on the lane) answers with a DeferredResponse and hands the body to a compute
//      thread: Prepare (parse, validate, tokenize, key) and Route run there, with that thread's
//      PolicyState; the result is posted back to the lane. One hand-off pair per request (and
//      one per retry, whose Route also runs there); never one per chunk.
//   1. Route (RequestPipeline) excluding workers already tried → OnRouted (load, prediction,
//      parity) → POST the client's body, unchanged, with X-Request-Id.
//   2. Nothing has reached the client yet until the response headers AND, for a stream, its
//      first body piece arrived; until then a failed attempt (connect error or timeout,
//      connection closed, first-byte timeout, HTTP 500/502/503/504) is retried on another
//      worker — RetryDecision below is the one rule.
//   3. Non-streaming: the whole body is read, then answered. Streaming: the first piece is
//      answered with the response, and each further piece is read from the worker only when
//      the client's socket took the previous one (the server's Pull): backpressure end to end.
//   4. A worker that fails mid-stream ends the client's stream with api::StreamErrorFrames (an
//      error event, then [DONE]) — never a hang. A client that disconnects cancels the upstream
//      request (its connection is closed, which vLLM treats as an abort).
//
// Lanes: with ProxyOptions::lanes_pool shared with the HTTP server (what `kvroute serve`
// does), a request runs on the lane of its client connection, so the client socket, the
// upstream socket and the exchange's state all live on one thread and a relayed chunk costs
// no cross-thread hand-off. Without it the proxy makes lanes of its own (tests) and a Pull
// from a server thread is posted over to the request's lane.
//
// Ownership: owns its compute pool; owns its lanes only when it made them; shares
// ProxyOptions::lanes_pool with its owner, who stops that pool after Stop() and destroys it after
// the proxy. Borrows the pipeline, router_state, metrics, parity checker and clock (all must outlive
// it). Thread safety: Handle() from any server thread; each request's state lives on its lane's
// thread. Stop() from a non-lane thread, after the HTTP server has stopped: it waits
// (bounded) for the cancelled exchanges to end, closes idle upstream connections on each lane
// and joins the lanes it owns.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/generation_params.h"
#include "client/client_types.h"
#include "common/clock.h"
#include "net/http_types.h"

namespace kvroute::net {
class LanePool;
}

namespace kvroute::fleet {
class RouterState;
}

namespace kvroute::gateway {

class RequestPipeline;
class RouterMetrics;
class ParityChecker;

// Why an attempt on one worker failed before anything reached the client.
enum class AttemptFailure {
  kConnect,           // refused, unreachable, connect timeout
  kFirstByteTimeout,  // no response headers in time
  kClosed,            // connection closed or reset before the response (or its body) ended
  kIdleTimeout,       // body stalled
  kUnavailable,       // the worker answered 502/503/504 (draining, overloaded, gateway)
  kServerError,       // the worker answered 500 (its own failure; counts against its health)
  kProtocol,          // malformed response
};
const char* AttemptFailureName(AttemptFailure failure);

enum class RetryDecision { kRetry, kGiveUp };

// The retry rule: only while nothing was sent to the client, and only `max_attempts` workers
// per request. Every failure kind above is retryable (the request never produced output the
// client saw; an upstream that had started is cancelled by closing its connection).
RetryDecision DecideRetry(AttemptFailure failure, bool sent_to_client, int attempts_made,
                          int max_attempts);

// The attempt failure a worker's HTTP status means, if any: 500 → kServerError,
// 502/503/504 → kUnavailable. Other statuses (200, 4xx) are answers relayed to the client.
std::optional<AttemptFailure> FailureOfStatus(int status);

// The compute pool's default size for `lanes` lanes: max(1, lanes / 2). The CPU work of a
// request is a few ms once per turn while its relay lasts seconds, so half the lanes keep the
// queue short; the threads sleep when idle, so they take no CPU from the lanes then. On a
// 2-CPU machine (2 lanes) this is 1.
int DefaultComputeThreads(int lanes);

// Maps a client-library error to the attempt failure it means.
AttemptFailure FailureOf(client::ErrorKind kind);

struct ProxyOptions {
  int lanes = 2;  // single-threaded io_contexts of its own, when lanes_pool is null
  // Lanes shared with the HTTP server (net::ServerOptions::lanes): a request's exchange then
  // runs on its client connection's lane (HttpRequest::lane), so relayed chunks never cross
  // threads. The proxy does not stop shared lanes; their owner stops them after Stop().
  std::shared_ptr<net::LanePool> lanes_pool;
  // Threads for the per-request CPU work (Prepare: parse, validate, tokenize, key; Route:
  // lookup, schedule), so that a lane does only socket I/O and a big prompt being tokenized
  // never stalls the streams relayed on the same lane. -1: DefaultComputeThreads(lanes);
  // 0: none, that work runs inline on the request's lane (the design before the offload).
  int compute_threads = -1;
  // Bodies smaller than this are prepared and routed inline on the lane: for them the work
  // (tens of µs) costs less than the two thread hand-offs (measured: ~70 CPU µs per request
  // at c=1 on a 2-CPU VM), and it is too short to stall other streams noticeably. 16 KiB is
  // about a 4k-token prompt.
  std::size_t compute_min_body_bytes = 16u << 10;
  int max_attempts = 3;
  // Times a stream whose worker died mid-stream is resumed on another worker (stream
  // migration, proxy/stream_migration.h); 0 (the default here; serve's config says 1): the
  // stream ends with an error event and [DONE].
  int max_migrations = 0;
  client::Timeouts timeouts;  // per attempt
  // P/D: the prefill leg's whole exchange (pd.prefill_timeout_ms); past it the request
  // decodes locally on its decode worker. 0: `timeouts` only.
  std::chrono::milliseconds pd_prefill_timeout{30'000};
  std::uint64_t seed = 1;     // PolicyState seeds (lane i uses seed + i)
  std::size_t max_response_bytes = 64u << 20;
};

class Proxy {
 public:
  Proxy(ProxyOptions options, const RequestPipeline* pipeline, fleet::RouterState* router_state,
        RouterMetrics* metrics, ParityChecker* parity, const Clock* clock);
  ~Proxy();  // Stop()
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // Parses, schedules and proxies one /v1/completions or /v1/chat/completions request.
  // Client errors are answered at once; otherwise a DeferredResponse. Takes the request by
  // rvalue: its body moves into the exchange (no copy of a large prompt per request).
  net::HandlerResult Handle(api::Endpoint endpoint, net::HttpRequest&& request);

  // POST /v1/messages (Anthropic Messages API): routed like chat, forwarded to the worker as
  // /v1/chat/completions, its answer translated back (gateway/anthropic_bridge.h). Errors,
  // kvroute's and the worker's, are in Anthropic's shape.
  net::HandlerResult HandleMessages(net::HttpRequest&& request);

  // Requests started and not yet finished (answered and, for streams, fully relayed).
  std::int64_t active() const;

  void Stop();  // idempotent; joins the lane threads

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// X-Request-Id: the client's when it sent a sane one (printable, ≤ 128 bytes), else generated.
std::string RequestIdFor(const net::HttpRequest& request);

}  // namespace kvroute::gateway
