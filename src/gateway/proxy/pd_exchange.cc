// Exchange, P/D side (issue 19): the prefill leg of a request the P/D decision split, run on
// the lane between the route and the decode leg (which is then an ordinary attempt of
// proxy_attempts.cc with its own body), and llm-d's fallback when the prefill leg fails.
//
//   route (compute: RouteTwoLegs, both legs booked) → RunPdLegs (lane):
//     POST the prefill body (do_remote_decode, max_tokens 1, not streamed) to P, same
//     X-Request-Id, bounded by ProxyOptions::pd_prefill_timeout, raced with the client's cancel
//     200 + kv_transfer_params → decode body = client body + those params; usage to merge
//     anything else → P's booking released, D re-booked as aggregated, client body to D
//   → the attempt sends to D; a failure before the first byte retries the whole placement
//     (RouteAgain excludes the tried decode workers; the new route prefills again)

// proxy_exchange.h says why (a false GCC 12 warning on Asio's coroutine frames).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <spdlog/spdlog.h>

#include <boost/json.hpp>

#include "api/pd_rewrite.h"
#include "fleet/router_state.h"
#include "gateway/proxy/pd_usage.h"
#include "gateway/proxy/proxy_exchange.h"
#include "gateway/router_metrics.h"

namespace kvroute::gateway {

asio::awaitable<void> Exchange::RunPdLegs() {
  if (!route_.prefill) {
    proxy_->metrics_->OnPdPlacement("aggregated");
    co_return;
  }
  prefill_open_ = true;  // booked with the route (BookPdRoute)
  const PrefillLeg& leg = *route_.prefill;
  client::ClientRequest r;
  if (auto url = client::ParseUrl(leg.base_url)) {
    r.host = url->host;
    r.port = url->port;
  }
  r.method = "POST";
  r.target =
      request_.endpoint == api::Endpoint::kCompletions ? "/v1/completions" : "/v1/chat/completions";
  r.shared_body = leg.prefill_body;
  r.content_type = "application/json";
  r.headers.emplace_back("x-request-id", request_id_);  // the same id on both legs
  if (proxy_->options_.pd_prefill_timeout.count() > 0) {
    client::Timeouts t = proxy_->options_.timeouts;
    t.total = proxy_->options_.pd_prefill_timeout;
    r.timeouts = t;
  }
  using namespace asio::experimental::awaitable_operators;
  auto raced = co_await (lane_->client->Send(std::move(r)) ||
                         cancel_signal_->async_wait(asio::as_tuple(asio::use_awaitable)));
  if (cancelled_ || raced.index() == 1) {
    ReleasePrefillLeg(false);
    co_return;
  }
  auto response = std::move(std::get<0>(raced));
  const Nanos now = proxy_->clock_->Now();
  std::string reason;
  std::string detail;
  std::optional<boost::json::object> params;
  if (!response) {
    reason = std::string(client::ErrorKindName(response.error().kind));
    detail = response.error().text;
    proxy_->router_state_->health().OnFailure(leg.worker, now);
  } else if (response->status != 200) {
    reason = "http_" + std::to_string(response->status);
    detail = response->body.substr(0, 200);
    // 502/503/504: busy or draining, not the worker's own fault (as for any attempt).
    if (FailureOfStatus(response->status) == AttemptFailure::kServerError) {
      proxy_->router_state_->health().OnFailure(leg.worker, now);
    }
  } else if (auto extracted = api::ExtractKvTransferParams(response->body)) {
    params = std::move(*extracted);
  } else {
    reason = "no_kv_transfer_params";
    detail = extracted.error().message;
  }
  if (!params) {
    ReleasePrefillLeg(false);
    FallBackToLocalDecode(reason, detail);
    co_return;
  }
  proxy_->router_state_->OnFirstToken(prefill_id(), now);  // its one token is its answer
  ReleasePrefillLeg(true);
  proxy_->router_state_->health().OnSuccess(leg.worker, now);
  attempt_body_ = std::make_shared<const std::string>(
      boost::json::serialize(api::MakeDecodeBody(*leg.client_body, *params)));
  prefill_cached_tokens_ = CachedTokensOf(response->body);
  if (prefill_cached_tokens_ && request_.stream) usage_rewriter_.emplace(*prefill_cached_tokens_);
  prefill_worker_name_ = leg.worker_name;
  proxy_->metrics_->OnPdPlacement("split");
}

void Exchange::ReleasePrefillLeg(bool ok) {
  if (!prefill_open_) return;
  prefill_open_ = false;
  proxy_->router_state_->OnDone(prefill_id(), proxy_->clock_->Now(), ok);
}

void Exchange::FallBackToLocalDecode(const std::string& reason, const std::string& detail) {
  const Nanos now = proxy_->clock_->Now();
  spdlog::warn("request {}: prefill leg on {} failed ({}: {}); decoding locally on {}",
               request_id_, route_.prefill->worker_name, reason, detail, route_.worker_name);
  proxy_->metrics_->OnPdPrefillFallback(reason);
  proxy_->metrics_->OnPdPlacement("local_fallback");
  // D now prefills as well: its decode-leg booking (nothing to prefill) becomes the
  // aggregated one, released once by this attempt's OnDone like any other.
  proxy_->router_state_->Cancel(id_, now);
  proxy_->router_state_->Book(id_, route_.prefill->local_booking, now);
}

}  // namespace kvroute::gateway
