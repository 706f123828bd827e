#include "gateway/proxy/proxy.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "api/api_error.h"
#include "api/sse_parser.h"
#include "api/stream_chunks.h"
#include "client/async_http_client.h"
#include "gateway/anthropic_bridge.h"
#include "gateway/parity.h"
#include "gateway/proxy/proxy_exchange.h"
#include "gateway/proxy/proxy_sse_count.h"
#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "fleet/router_state.h"
#include "net/body_queue.h"
#include "net/lane_pool.h"
#include "sched/plugin.h"

namespace kvroute::gateway {

const char* AttemptFailureName(AttemptFailure failure) {
  switch (failure) {
    case AttemptFailure::kConnect:
      return "connect";
    case AttemptFailure::kFirstByteTimeout:
      return "first_byte_timeout";
    case AttemptFailure::kClosed:
      return "closed";
    case AttemptFailure::kIdleTimeout:
      return "idle_timeout";
    case AttemptFailure::kUnavailable:
      return "unavailable";
    case AttemptFailure::kServerError:
      return "server_error";
    case AttemptFailure::kProtocol:
      return "protocol";
  }
  return "unknown";
}

RetryDecision DecideRetry(AttemptFailure failure, bool sent_to_client, int attempts_made,
                          int max_attempts) {
  (void)failure;  // every kind is retryable while the client has seen nothing
  if (sent_to_client) return RetryDecision::kGiveUp;
  if (attempts_made >= max_attempts) return RetryDecision::kGiveUp;
  return RetryDecision::kRetry;
}

AttemptFailure FailureOf(client::ErrorKind kind) {
  switch (kind) {
    case client::ErrorKind::kConnectRefused:
    case client::ErrorKind::kConnectTimeout:
      return AttemptFailure::kConnect;
    case client::ErrorKind::kFirstByteTimeout:
      return AttemptFailure::kFirstByteTimeout;
    case client::ErrorKind::kIdleTimeout:
    case client::ErrorKind::kTotalTimeout:
      return AttemptFailure::kIdleTimeout;
    case client::ErrorKind::kClosedEarly:
    case client::ErrorKind::kCancelled:
      return AttemptFailure::kClosed;
    case client::ErrorKind::kProtocol:
      return AttemptFailure::kProtocol;
  }
  return AttemptFailure::kProtocol;
}

std::string RequestIdFor(const net::HttpRequest& request) {
  std::string_view given = request.Header("x-request-id");
  bool sane = !given.empty() && given.size() <= 128;
  for (char c : given) {
    if (c < 0x21 || c > 0x7e) sane = false;
  }
  if (sane) return std::string(given);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

int DefaultComputeThreads(int lanes) { return std::max(1, lanes / 2); }

std::optional<AttemptFailure> FailureOfStatus(int status) {
  if (status == 502 || status == 503 || status == 504) return AttemptFailure::kUnavailable;
  if (status == 500) return AttemptFailure::kServerError;
  return std::nullopt;
}

Proxy::Proxy(ProxyOptions options, const RequestPipeline* pipeline, fleet::RouterState* router_state,
             RouterMetrics* metrics, ParityChecker* parity, const Clock* clock)
    : impl_(std::make_shared<Impl>(options, pipeline, router_state, metrics, parity, clock)) {}

Proxy::~Proxy() { Stop(); }

void Proxy::Stop() { impl_->Stop(); }

std::int64_t Proxy::active() const { return impl_->active_.load(); }

namespace {

// Starts the exchange and answers later: even a client error is found on the compute pool
// (parsing is the costly part), so the handler itself only moves the body into the exchange.
net::HandlerResult StartExchange(const std::shared_ptr<Proxy::Impl>& impl_, ApiSurface surface,
                                 api::Endpoint endpoint, net::HttpRequest&& request) {
  const Nanos now = impl_->clock_->Now();
  Lane& lane = impl_->LaneFor(request);
  std::string request_id = RequestIdFor(request);  // before the body leaves the request
  RequestContext context{.tenant_salt = impl_->pipeline_->TenantSalt(request)};
  auto exchange =
      std::make_shared<Exchange>(impl_.get(), &lane, surface, endpoint, std::move(request.body),
                                 std::move(context), std::move(request_id), now);
  auto slot = exchange->MakeSlot();
  exchange->Start();
  return std::shared_ptr<net::DeferredResponse>(slot);
}

}  // namespace

net::HandlerResult Proxy::Handle(api::Endpoint endpoint, net::HttpRequest&& request) {
  return StartExchange(impl_, ApiSurface::kOpenAi, endpoint, std::move(request));
}

net::HandlerResult Proxy::HandleMessages(net::HttpRequest&& request) {
  return StartExchange(impl_, ApiSurface::kAnthropic, api::Endpoint::kChatCompletions,
                       std::move(request));
}

}  // namespace kvroute::gateway
