// Exchange: its setup, hand-offs to the compute pool (prepare, route, book), the answers it
// builds and the bookkeeping of each attempt. The attempt loop and the relay are in
// proxy_attempts.cc.
#include "gateway/proxy/proxy_exchange.h"

#include <spdlog/spdlog.h>

#include "api/api_error.h"
#include "api/sse_parser.h"
#include "api/stream_chunks.h"
#include "client/async_http_client.h"
#include "gateway/anthropic_bridge.h"
#include "gateway/parity.h"
#include "gateway/proxy/proxy_sse_count.h"
#include "gateway/request_booking.h"
#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "fleet/router_state.h"
#include "net/body_queue.h"
#include "net/lane_pool.h"
#include "sched/plugin.h"

namespace kvroute::gateway {

namespace {

// kvroute's own error, in the shape of the API the client spoke.
net::HttpResponse ErrorResponse(ApiSurface surface, const api::ApiError& error,
                                const std::string& request_id) {
  net::HttpResponse r = net::JsonResponse(
      error.status, surface == ApiSurface::kAnthropic ? AnthropicErrorBody(error) : error.Body());
  r.headers.emplace_back("x-request-id", request_id);
  return r;
}

}  // namespace

Exchange::Exchange(Proxy::Impl* proxy, Lane* lane, ApiSurface surface, api::Endpoint endpoint,
                   std::string body, RequestContext context, std::string request_id, Nanos arrived)
    : proxy_(proxy),
      lane_(lane),
      anthropic_(surface == ApiSurface::kAnthropic),
      endpoint_(endpoint),
      client_body_(std::move(body)),
      context_(std::move(context)),
      request_id_(std::move(request_id)),
      id_(proxy->next_id_.fetch_add(1)),
      arrived_(arrived),
      offload_(client_body_.size() >= proxy->options_.compute_min_body_bytes) {
  proxy_->active_.fetch_add(1);
  proxy_->metrics_->InflightDelta(1);
}

Exchange::~Exchange() {
  proxy_->active_.fetch_sub(1);
  proxy_->metrics_->InflightDelta(-1);
}

std::shared_ptr<net::DeferredSlot> Exchange::MakeSlot() {
  std::weak_ptr<Exchange> weak = weak_from_this();
  slot_ = std::make_shared<net::DeferredSlot>([weak] {
    if (auto self = weak.lock()) self->PostCancel();
  });
  return slot_;
}

void Exchange::Start() {
  auto self = shared_from_this();
  asio::co_spawn(lane_->ctx, Run(self), [self](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("request {}: proxy failed: {}", self->request_id_, ex.what());
    }
    self->Answer(self->ErrorReply(api::ApiError::Internal()));
    self->Finish(false, 500);
  });
}

void Exchange::Pull(Deliver deliver) {
  if (lane_->OnThisThread()) return PullOnLane(std::move(deliver));
  auto self = shared_from_this();
  asio::post(lane_->ctx, [self, deliver = std::move(deliver)]() mutable {
    self->PullOnLane(std::move(deliver));
  });
}

void Exchange::PostCancel() {
  auto self = shared_from_this();
  asio::post(lane_->ctx, [self] { self->CancelOnLane(); });
}

void Exchange::CancelOnLane() {
  if (cancelled_) return;
  cancelled_ = true;
  if (cancel_signal_) cancel_signal_->cancel();
  if (upstream_) upstream_->Cancel();
  if (routed_ && !finished_) {
    proxy_->metrics_->OnError("client_cancelled");
    Finish(false, 499);
  }
}

net::HttpResponse Exchange::ErrorReply(const api::ApiError& error) const {
  return ErrorResponse(anthropic_ ? ApiSurface::kAnthropic : ApiSurface::kOpenAi, error,
                       request_id_);
}

void Exchange::BookRoute(const PreparedRequest& request, const RouteOutcome& route,
                         Nanos now) const {
  if (route.prefill) {
    BookPdRoute(*proxy_->router_state_, *proxy_->pipeline_, id_, prefill_id(), request, route,
                now);
    return;
  }
  gateway::BookRoute(*proxy_->router_state_, *proxy_->pipeline_, id_, request, route, now);
}

void Exchange::UnbookRoute(bool with_prefill) {
  const Nanos now = proxy_->clock_->Now();
  proxy_->router_state_->Cancel(id_, now);
  if (with_prefill) proxy_->router_state_->Cancel(prefill_id(), now);
}

asio::awaitable<Exchange::Prepared> Exchange::PrepareAndRoute() {
  auto self = shared_from_this();
  return OnCompute<Prepared>([self,
                              body = std::move(client_body_)](sched::PolicyState& state) mutable {
    Prepared out;
    const Clock* clock = self->proxy_->clock_;
    const RequestPipeline* pipeline = self->proxy_->pipeline_;
    Nanos t0 = clock->Now();
    // The body moves into the prepared request, which every attempt then shares.
    out.request = self->anthropic_ ? pipeline->PrepareMessages(body, self->arrived_, self->context_)
                                   : pipeline->PrepareOwned(self->endpoint_, std::move(body),
                                                            self->arrived_, self->context_);
    Nanos t1 = clock->Now();
    out.prepare_time = t1 - t0;
    if (out.request) {
      out.route.emplace(pipeline->RouteTwoLegs(*out.request, {}, t1, state));
      const Nanos t2 = clock->Now();
      out.route_time = t2 - t1;
      if (out.route->has_value()) {
        self->BookRoute(*out.request, **out.route, t2);
        out.booked = true;
        out.booked_prefill = (**out.route).prefill.has_value();
      }
    }
    return out;
  });
}

asio::awaitable<Exchange::Routed> Exchange::RouteAgain(std::vector<WorkerId> tried) {
  auto self = shared_from_this();
  return OnCompute<Routed>([self, tried = std::move(tried)](sched::PolicyState& state) {
    Routed out;
    const Clock* clock = self->proxy_->clock_;
    Nanos t0 = clock->Now();
    out.route.emplace(self->proxy_->pipeline_->RouteTwoLegs(self->request_, tried, t0, state));
    const Nanos t1 = clock->Now();
    out.route_time = t1 - t0;
    if (out.route->has_value()) {
      self->BookRoute(self->request_, **out.route, t1);
      out.booked = true;
      out.booked_prefill = (**out.route).prefill.has_value();
    }
    return out;
  });
}

std::string Exchange::Relay(std::string piece) {
  if (continuation_) piece = continuation_->Feed(piece);  // what would duplicate is dropped
  if (streamed_) streamed_->Feed(piece);
  Observe(piece);
  if (usage_rewriter_) piece = usage_rewriter_->Feed(piece);
  return Translate(std::move(piece));
}

std::string Exchange::Translate(std::string piece) {
  if (!translator_ || piece.empty()) return piece;
  events_.clear();
  std::string out;
  if (!sse_.Feed(piece, events_)) return out;
  for (const auto& e : events_) translator_->OnEvent(e, &out);
  return out;
}

net::HttpResponse Exchange::BufferedReply(int status, std::string content_type, std::string body) {
  net::HttpResponse r;
  r.status = status;
  r.content_type = content_type.empty() ? "application/json" : std::move(content_type);
  r.body = std::move(body);
  if (status == 200 && prefill_cached_tokens_) {
    r.body = MergePrefillUsage(r.body, *prefill_cached_tokens_);
  }
  if (anthropic_) {
    r.content_type = "application/json";
    if (status != 200) {
      r.body = AnthropicErrorFromUpstream(status, r.body);
    } else if (auto message = AnthropicMessageFromChat(r.body, request_.model)) {
      r.body = std::move(*message);
    } else {
      spdlog::warn("request {}: worker {}: {}", request_id_, route_.worker_name, message.error());
      api::ApiError err = api::ApiError::Internal("the model server's answer was malformed");
      err.status = 502;
      r.status = 502;
      r.body = AnthropicErrorBody(err);
    }
  }
  r.headers.emplace_back("x-request-id", request_id_);
  r.headers.emplace_back("x-kvroute-worker", route_.worker_name);
  if (!prefill_worker_name_.empty()) {
    r.headers.emplace_back("x-kvroute-prefill-worker", prefill_worker_name_);
  }
  return r;
}

void Exchange::Answer(net::HttpResponse response) {
  if (answered_) return;
  answered_ = true;
  slot_->Set(std::move(response));
}

client::ClientRequest Exchange::UpstreamRequest() const {
  client::ClientRequest r;
  auto url = client::ParseUrl(route_.base_url);
  if (url) {
    r.host = url->host;
    r.port = url->port;
  }
  r.method = "POST";
  r.target =
      request_.endpoint == api::Endpoint::kCompletions ? "/v1/completions" : "/v1/chat/completions";
  // Shared by every attempt, never copied; a P/D decode leg sends its own body.
  r.shared_body = attempt_body_ ? attempt_body_ : request_.body;
  r.content_type = "application/json";
  r.headers.emplace_back("x-request-id", request_id_);
  return r;
}

void Exchange::OnRouted() {
  Nanos now = proxy_->clock_->Now();
  routed_ = true;
  finished_ = false;
  first_token_at_.reset();
  last_token_at_.reset();
  tokens_ = 0;
  response_tokens_.Reset();
  attempt_body_.reset();
  prefill_cached_tokens_.reset();
  usage_rewriter_.reset();
  prefill_worker_name_.clear();
  if (proxy_->parity_ != nullptr && !request_.keys.empty() &&
      proxy_->pipeline_->options().mode == RoutingMode::kPrecise) {
    proxy_->parity_->OnRouted(id_, route_.worker, request_.keys, now);
  }
  const std::uint32_t bs = request_.block_size;
  const double prompt = static_cast<double>(std::max<std::int64_t>(request_.prompt_tokens, 0));
  proxy_->metrics_->AddPromptTokens(prompt);
  static constexpr const char* kTierNames[] = {"gpu", "cpu", "disk", "shared"};
  std::uint32_t counted = 0;
  for (int t = 0; t < kv::kNumTiers && t < 4; ++t) {
    // Each block counted once, at its fastest tier (tiers are layered like the scheduler's).
    std::uint32_t depth = std::max(route_.cached_blocks[t], counted);
    proxy_->metrics_->AddPredictedCached(
        kTierNames[t], std::min(prompt, static_cast<double>(depth - counted) * bs));
    counted = depth;
  }
}

void Exchange::OnAttemptFailed(AttemptFailure failure, const std::string& detail) {
  Nanos now = proxy_->clock_->Now();
  spdlog::warn("request {}: worker {} failed ({}: {})", request_id_, route_.worker_name,
               AttemptFailureName(failure), detail);
  // 502/503/504 mean busy, draining or a gateway in between: not the worker's own fault.
  if (failure != AttemptFailure::kUnavailable) {
    proxy_->router_state_->health().OnFailure(route_.worker, now);
  }
  proxy_->router_state_->OnDone(id_, now, false);
  if (proxy_->parity_ != nullptr) proxy_->parity_->OnFailed(id_);
  routed_ = false;
  upstream_.reset();
}

void Exchange::Finish(bool ok, int status) {
  if (finished_) return;
  finished_ = true;
  if (prefill_open_) ReleasePrefillLeg(false);  // a cancel or failure during the prefill leg
  Nanos now = proxy_->clock_->Now();
  if (routed_) {
    proxy_->router_state_->OnDone(id_, now, ok);
    if (!ok && proxy_->parity_ != nullptr) proxy_->parity_->OnFailed(id_);
  }
  proxy_->metrics_->OnRequestDone(request_.model, routed_ ? route_.worker_name : "", status);
  spdlog::info(
      "request {} model={} worker={} status={} stream={} prompt_tokens={} cached_blocks={} "
      "tokens={} ttft_ms={:.1f} total_ms={:.1f} attempts={}{}",
      request_id_, request_.model, route_.worker_name, status, request_.stream,
      request_.prompt_tokens, route_.cached_any_blocks, tokens_,
      first_token_at_ ? ToSeconds(*first_token_at_ - arrived_) * 1e3 : -1.0,
      ToSeconds(now - arrived_) * 1e3, attempts_, route_.fell_back ? " fell_back" : "");
}

void Exchange::Observe(std::string_view piece) {
  Nanos now = proxy_->clock_->Now();
  const ResponseTokens::Step step = response_tokens_.Observe(piece, now);  // books them
  if (step.error) stream_error_ = true;
  const std::uint32_t n = step.tokens;
  if (n == 0) return;
  if (step.first && proxy_->parity_ != nullptr) proxy_->parity_->OnFirstToken(id_, now);
  if (step.first && !first_token_at_) {  // a migrated stream's TTFT is its first worker's
    first_token_at_ = now;
    histograms_ = &lane_->HistogramsFor(*proxy_->metrics_, request_.model);
    histograms_->ttft->Observe(ToSeconds(now - arrived_));
  } else {
    histograms_->itl->Observe(ToSeconds(now - *last_token_at_) / n);
  }
  last_token_at_ = now;
  tokens_ += n;
}

}  // namespace kvroute::gateway
