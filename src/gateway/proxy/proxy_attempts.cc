// Exchange: the attempt loop (route, send, retry elsewhere while the client has seen nothing)
// and the relay of a stream's pieces to the client, Pull by Pull.

// proxy_exchange.h says why (a false GCC 12 warning on Asio's coroutine frames); repeated here
// because Asio's headers come in before that header does.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <spdlog/spdlog.h>

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

asio::awaitable<void> Exchange::Attempts() {
  const int max_attempts = std::max(1, proxy_->options_.max_attempts);
  std::vector<WorkerId>& tried = tried_;  // a migration excludes them too
  api::ApiError last_error = api::ApiError::Overloaded("no worker could serve this request");
  last_error.status = 502;
  Prepared prepared = co_await PrepareAndRoute();
  if (cancelled_) {
    if (prepared.booked) UnbookRoute(prepared.booked_prefill);
    co_return;
  }
  if (!prepared.request) {
    // A client error: it never reaches a worker.
    finished_ = true;
    proxy_->metrics_->OnError("bad_request");
    proxy_->metrics_->OnRequestDone("", "", prepared.request.error().status);
    Answer(ErrorReply(prepared.request.error()));
    co_return;
  }
  request_ = std::move(*prepared.request);
  if (anthropic_ && request_.stream) {
    translator_.emplace(request_.model, request_.prompt_tokens);
  }
  if (request_.stream && proxy_->options_.max_migrations > 0) streamed_.emplace(request_.endpoint);
  // The decision latency: CPU work only (parse, tokenize, key, route), not the hand-offs.
  proxy_->metrics_->ObserveDecision(ToSeconds(prepared.prepare_time + prepared.route_time));
  std::optional<std::expected<RouteOutcome, api::ApiError>> next = std::move(prepared.route);
  while (!cancelled_) {
    if (!next) {
      Routed again = co_await RouteAgain(tried);
      if (cancelled_) {
        if (again.booked) UnbookRoute(again.booked_prefill);
        co_return;
      }
      next = std::move(again.route);
    }
    auto route = std::move(*next);
    next.reset();
    if (!route) {
      // Nothing routable left. After failed attempts the client learns that the workers
      // failed (502); before any attempt, why none could be chosen (503, or fail_close).
      const bool first = tried.empty();
      const auto& popt = proxy_->pipeline_->options();
      if (first && popt.failure_mode == FailureMode::kFailClose &&
          (request_.schedule_error || popt.inject_schedule_error)) {
        proxy_->metrics_->OnSchedulingFailure("fail_close");
      }
      proxy_->metrics_->OnError(first ? "no_worker" : "retries_exhausted");
      const api::ApiError& err = first ? route.error() : last_error;
      Answer(ErrorReply(err));
      Finish(false, err.status);
      co_return;
    }
    route_ = std::move(*route);
    if (route_.fell_back) {
      proxy_->metrics_->OnSchedulingFailure("fail_open");
      spdlog::warn("request {}: scheduling failed ({}); fail_open routes by load to {}",
                   request_id_, route_.fallback_reason, route_.worker_name);
    }
    tried.push_back(route_.worker);
    ++attempts_;
    OnRouted();

    // Race the request against the client's cancel: a client that leaves while the worker
    // has not even sent headers (a non-streaming request) cancels the upstream at once.
    using namespace asio::experimental::awaitable_operators;
    if (!cancel_signal_) {
      cancel_signal_.emplace(lane_->ctx, asio::steady_timer::time_point::max());
    }
    if (route_.pd_placed) {
      co_await RunPdLegs();  // a split's prefill leg; the decode leg is this attempt
      if (cancelled_) co_return;
    }
    auto raced = co_await (lane_->client->Stream(UpstreamRequest()) ||
                           cancel_signal_->async_wait(asio::as_tuple(asio::use_awaitable)));
    if (cancelled_ || raced.index() == 1) co_return;
    auto stream = std::move(std::get<0>(raced));
    std::optional<AttemptFailure> failure;
    std::string detail;
    if (!stream) {
      failure = FailureOf(stream.error().kind);
      detail = stream.error().text;
    } else if (auto bad = FailureOfStatus((*stream)->status())) {
      failure = *bad;
      detail = "HTTP " + std::to_string((*stream)->status());
      (*stream)->Cancel();
    } else {
      upstream_ = std::move(*stream);
      const int status = upstream_->status();
      if (!request_.stream || status != 200) {
        // Buffered answer: read it all before anything is sent.
        std::string body;
        while (true) {
          auto piece = co_await upstream_->Next();
          if (cancelled_) co_return;
          if (!piece) {
            failure = FailureOf(piece.error().kind);
            detail = piece.error().text;
            break;
          }
          if (!*piece) break;
          if (body.empty() && status == 200) {
            Nanos t = proxy_->clock_->Now();
            first_token_at_ = t;
            response_tokens_.ObserveBuffered(t);
            if (proxy_->parity_ != nullptr) proxy_->parity_->OnFirstToken(id_, t);
          }
          body += **piece;
        }
        if (!failure) {
          net::HttpResponse r = BufferedReply(
              status, std::string(upstream_->Header("content-type")), std::move(body));
          upstream_.reset();
          proxy_->router_state_->health().OnSuccess(route_.worker, proxy_->clock_->Now());
          Answer(std::move(r));
          Finish(status < 400, status);
          co_return;
        }
      } else {
        // Stream: wait for the first piece so that a worker failing before any output is
        // still retried elsewhere.
        auto piece = co_await upstream_->Next();
        if (cancelled_) co_return;
        if (!piece) {
          failure = FailureOf(piece.error().kind);
          detail = piece.error().text;
        } else if (!*piece) {
          failure = AttemptFailure::kClosed;
          detail = "empty stream";
        } else {
          preloaded_ = Relay(std::move(**piece));
          net::HttpResponse r;
          r.status = 200;
          r.content_type = std::string(upstream_->Header("content-type"));
          if (r.content_type.empty()) r.content_type = "text/event-stream";
          r.headers.emplace_back("x-request-id", request_id_);
          r.headers.emplace_back("x-kvroute-worker", route_.worker_name);
          if (!prefill_worker_name_.empty()) {
            r.headers.emplace_back("x-kvroute-prefill-worker", prefill_worker_name_);
          }
          r.headers.emplace_back("cache-control", "no-cache");
          r.stream = shared_from_this();
          Answer(std::move(r));
          co_return;  // the rest is driven by Pull
        }
      }
    }
    // The attempt failed before the client saw anything.
    OnAttemptFailed(*failure, detail);
    if (DecideRetry(*failure, false, attempts_, max_attempts) == RetryDecision::kGiveUp) {
      last_error.message =
          "the worker failed before answering (" + std::string(AttemptFailureName(*failure)) + ")";
      proxy_->metrics_->OnError("upstream_" + std::string(AttemptFailureName(*failure)));
      Answer(ErrorReply(last_error));
      Finish(false, last_error.status);
      co_return;
    }
    proxy_->metrics_->OnRetry(AttemptFailureName(*failure));
  }
}

void Exchange::PullOnLane(Deliver deliver) {
  if (preloaded_) {
    std::string piece = std::move(*preloaded_);
    preloaded_.reset();
    deliver(std::move(piece));
    return;
  }
  if (cancelled_ || finished_ || !upstream_) {
    deliver(std::nullopt);
    return;
  }
  // One callback-driven read per Pull: no coroutine is spawned per relayed piece (a
  // co_spawn per Pull cost a post, a coroutine thread and its frames on every chunk). The
  // callback owns the exchange while the read is outstanding (it fits the callback's
  // inline storage: no allocation), so a read dropped with its io_context frees it too.
  pending_deliver_ = std::move(deliver);
  upstream_->ReadNext([self = shared_from_this()](client::ResponseStream::NextResult piece) {
    self->OnPiece(std::move(piece));
  });
}

void Exchange::OnPiece(client::ResponseStream::NextResult piece) {
  Deliver deliver = std::move(pending_deliver_);
  if (cancelled_) {
    deliver(std::nullopt);
    return;
  }
  if (!piece && !response_tokens_.done()) {
    // The worker failed mid-stream: the status line is long gone, so end the stream with
    // an error event the client can read, then [DONE].
    AttemptFailure f = FailureOf(piece.error().kind);
    if (MayMigrate()) {
      StartMigration(f, piece.error().text, std::move(deliver));
      return;
    }
    if (streamed_) proxy_->metrics_->OnStreamMigration("limit");
    spdlog::warn("request {}: worker {} failed mid-stream ({}: {})", request_id_,
                 route_.worker_name, AttemptFailureName(f), piece.error().text);
    proxy_->router_state_->health().OnFailure(route_.worker, proxy_->clock_->Now());
    upstream_.reset();
    EndWithErrorFrames(std::move(deliver));
    return;
  }
  if (!piece || !*piece) {
    // The end of the body — or a worker that went away after its stream's [DONE] (killed
    // before the last chunk of its chunked body): the client already has the whole answer,
    // and a second [DONE] after an error event would corrupt it. Health is the checker's
    // to judge then, not this request's.
    if (!piece) {
      spdlog::info("request {}: worker {} closed the connection after the stream ended ({})",
                   request_id_, route_.worker_name, piece.error().text);
    } else {
      proxy_->router_state_->health().OnSuccess(route_.worker, proxy_->clock_->Now());
    }
    upstream_.reset();
    response_tokens_.Flush();  // the last window's sample
    Finish(!stream_error_, 200);
    // A translated stream may still owe its closing events; the next Pull ends the body.
    // Bytes a split request's usage rewriter still held (an unterminated last event).
    std::string tail = usage_rewriter_ ? Translate(usage_rewriter_->Finish()) : std::string();
    if (translator_) translator_->OnEnd(&tail);
    if (!tail.empty()) {
      deliver(std::move(tail));
    } else {
      deliver(std::nullopt);
    }
    return;
  }
  deliver(Relay(std::move(**piece)));
}

}  // namespace kvroute::gateway
