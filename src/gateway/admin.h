// The HTTP surface of `kvroute serve` (everything but the proxying itself, which is
// proxy.h): routes, API-key check, and the small endpoints:
//
//   POST /v1/completions, /v1/chat/completions   → Proxy (streaming or not)
//   POST /v1/messages      Anthropic Messages API → Proxy::HandleMessages
//   GET  /v1/models        models of the routable workers (their own /v1/models answers)
//   POST /tokenize, /detokenize   answered by kvroute's tokenizer (precise mode)
//   GET  /health           liveness: 200 while the process serves HTTP
//   GET  /ready            readiness: 200 only when not draining and a worker is routable
//   GET  /metrics          Prometheus text (RouterMetrics; gauges refreshed per scrape)
//   POST /debug/route      the decision for a request body, with reasons; nothing is sent
//   GET  /admin/workers    every worker: health, drain, load, scraped metrics, learned rates
//   POST /admin/drain, /admin/undrain   body {"worker": "<name>"}
//   GET  /admin/index/snapshot   the KV index image with its worker-name table, for a
//                          sibling replica warming before it reports ready (replica_warm.h)
//   GET  /admin/replica/deltas   this replica's booking delta stream, for a sibling
//                          (docs/replicas.md); 404 unless replicas.share_bookings with siblings
//
// With api_keys configured, /v1/*, /tokenize, /detokenize, /debug/* and /admin/* need
// "Authorization: Bearer <key>" (401 otherwise) — /v1/messages also accepts Anthropic's
// "x-api-key: <key>"; /health, /ready and /metrics stay open for probes and scrapers.
//
// Ownership: borrows everything in EndpointContext (owned by Gateway, outlives the server).
// Thread safety: handlers run concurrently on the server threads; every dependency is
// thread-safe; the debug PolicyState is guarded by its own mutex.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gateway/config.h"
#include "net/http_server.h"
#include "tokenize/tokenizer.h"

namespace kvroute::fleet {
class RouterState;
}
namespace kvroute::kv {
class KvIndex;
}

namespace kvroute::gateway {

class DeltaPublisher;
class Proxy;
class RequestPipeline;
class RouterMetrics;
class ModelCatalog;

struct EndpointContext {
  const GatewayConfig* config = nullptr;
  Proxy* proxy = nullptr;
  const RequestPipeline* pipeline = nullptr;
  fleet::RouterState* router_state = nullptr;
  RouterMetrics* metrics = nullptr;
  const ModelCatalog* catalog = nullptr;
  tokenize::TokenizerPtr tokenizer;  // may be null (approximate mode)
  const Clock* clock = nullptr;
  const std::atomic<bool>* draining = nullptr;
  const kv::KvIndex* index = nullptr;  // null in approximate mode (no snapshot to give)
  DeltaPublisher* deltas = nullptr;    // null without the replica delta stream
  // Refreshes mirrored gauges (index size, lag, parity, worker state) before an exposition.
  std::function<void()> refresh_metrics;
};

// Registers every route above on `server` (before Start).
void RegisterEndpoints(net::HttpServer& server, std::shared_ptr<const EndpointContext> context);

// True when `header` ("Bearer <key>") carries one of `keys`, or `keys` is empty.
bool Authorized(std::string_view header, const std::vector<std::string>& keys);
// True when `key` (an x-api-key value) is one of `keys`, or `keys` is empty. Constant time
// in the key's bytes.
bool AuthorizedApiKey(std::string_view key, const std::vector<std::string>& keys);

}  // namespace kvroute::gateway
