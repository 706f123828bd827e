// Exchange, stream-migration side (issue 21): a worker failed after the client had bytes of
// its stream and before [DONE]. Instead of ending the stream with an error event, the
// request is resumed on another worker with a continuation (stream_migration.h), whose
// token events go into the same client stream:
//
//   OnPiece (worker failed, MayMigrate) → StartMigration → Migrate (lane coroutine):
//     the failed attempt released (OnDone, health) → BuildContinuation
//       complete (all tokens streamed) → [DONE] only
//       send → RouteAgain excluding every worker tried (booked there; a P/D split is
//              re-booked aggregated: the continuation is one leg) → POST the continuation
//              → its first piece answers the held Pull; later pieces go through Relay
//              (ContinuationRelay drops the role chunk, rewrites usage)
//     a continuation failing before its first byte costs one migration too; past
//     limits.max_migrations, or with no worker left: the error event and [DONE], as before.
//
// The held Pull (`deliver`) is answered exactly once on every path.

// proxy_exchange.h says why (a false GCC 12 warning on Asio's coroutine frames).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <spdlog/spdlog.h>

#include "fleet/router_state.h"
#include "gateway/proxy/proxy_exchange.h"
#include "gateway/proxy/stream_migration.h"
#include "gateway/router_metrics.h"

namespace kvroute::gateway {

bool Exchange::MayMigrate() const {
  return streamed_ && migrations_ < proxy_->options_.max_migrations && !cancelled_;
}

void Exchange::StartMigration(AttemptFailure failure, std::string detail, Deliver deliver) {
  auto self = shared_from_this();
  // `deliver` is shared with the completion handler so that an exception still answers it.
  auto held = std::make_shared<Deliver>(std::move(deliver));
  Deliver once = [held](std::optional<std::string> bytes) {
    if (!*held) return;
    Deliver d = std::move(*held);
    *held = nullptr;
    d(std::move(bytes));
  };
  asio::co_spawn(lane_->ctx, RunMigration(self, failure, std::move(detail), once),
                 [self, once](std::exception_ptr e) {
                   if (!e) return;
                   try {
                     std::rethrow_exception(e);
                   } catch (const std::exception& ex) {
                     spdlog::error("request {}: stream migration failed: {}", self->request_id_,
                                   ex.what());
                   }
                   self->EndWithErrorFrames(once);
                 });
}

asio::awaitable<void> Exchange::Migrate(AttemptFailure failure, std::string detail,
                                        Deliver deliver) {
  spdlog::warn("request {}: worker {} failed mid-stream ({}: {}) after {} tokens; migrating",
               request_id_, route_.worker_name, AttemptFailureName(failure), detail,
               streamed_->tokens());
  if (streamed_->mid_event()) {
    // The client holds the first half of the dead worker's last event; a continuation's
    // events after it would not parse. Rare (a worker writes whole events per chunk).
    spdlog::warn("request {}: the failed stream ended inside an event", request_id_);
  }
  OnAttemptFailed(failure, detail);  // released once; health; upstream_ gone
  const char* outcome = "no_worker";
  while (migrations_ < proxy_->options_.max_migrations) {
    if (!streamed_->unsupported().empty()) {
      outcome = "unsupported";
      spdlog::warn("request {}: stream not migrated: {}", request_id_, streamed_->unsupported());
      break;
    }
    ++migrations_;
    const std::optional<std::string> text = streamed_->text();
    if (!text) {
      outcome = "unsupported";
      spdlog::warn("request {}: stream not migrated: its text does not decode", request_id_);
      break;
    }
    Continuation next =
        BuildContinuation(request_.endpoint, *request_.body, *text, streamed_->tokens());
    if (next.kind == Continuation::Kind::kComplete) {
      // Every requested token reached the client: it is owed only the stream's end.
      proxy_->metrics_->OnStreamMigration("completed");
      Finish(!stream_error_, 200);
      std::string tail = Translate("data: [DONE]\n\n");
      if (translator_) translator_->OnEnd(&tail);
      deliver(std::move(tail));
      co_return;
    }
    if (next.kind == Continuation::Kind::kUnsupported) {
      outcome = "unsupported";
      spdlog::warn("request {}: stream not migrated: {}", request_id_, next.reason);
      break;
    }
    auto body = std::make_shared<const std::string>(std::move(next.body));
    Routed again = co_await RouteAgain(tried_);
    if (cancelled_) {
      if (again.booked) UnbookRoute(again.booked_prefill);
      proxy_->metrics_->OnError("client_cancelled");
      Finish(false, 499);  // not routed: nothing more to release
      deliver(std::nullopt);
      co_return;
    }
    if (!again.route || !again.route->has_value()) {
      outcome = "no_worker";
      break;
    }
    route_ = std::move(**again.route);
    if (route_.prefill) {
      // The continuation is sent as one aggregated request: undo the split's prefill leg.
      const Nanos now = proxy_->clock_->Now();
      proxy_->router_state_->Cancel(prefill_id(), now);
      proxy_->router_state_->Cancel(id_, now);
      proxy_->router_state_->Book(id_, route_.prefill->local_booking, now);
      route_.prefill.reset();
    }
    tried_.push_back(route_.worker);
    ++attempts_;
    routed_ = true;
    response_tokens_.Reset();  // the new booking's first token is its own
    usage_rewriter_.reset();   // a split's merged usage was the failed leg's
    prefill_cached_tokens_.reset();
    attempt_body_ = body;
    continuation_.emplace(request_.endpoint, streamed_->tokens());
    using namespace asio::experimental::awaitable_operators;
    auto raced = co_await (lane_->client->Stream(UpstreamRequest()) ||
                           cancel_signal_->async_wait(asio::as_tuple(asio::use_awaitable)));
    if (cancelled_ || raced.index() == 1) {
      deliver(std::nullopt);  // CancelOnLane released the booking (Finish)
      co_return;
    }
    auto stream = std::move(std::get<0>(raced));
    std::optional<AttemptFailure> bad;
    std::string why;
    if (!stream) {
      bad = FailureOf(stream.error().kind);
      why = stream.error().text;
    } else if ((*stream)->status() != 200) {
      // A 4xx is an answer to the original request, but not one a client mid-stream can
      // get; treated as this continuation's failure (the worker's health judges only 500).
      bad = FailureOfStatus((*stream)->status()).value_or(AttemptFailure::kUnavailable);
      why = "HTTP " + std::to_string((*stream)->status());
      (*stream)->Cancel();
    } else {
      upstream_ = std::move(*stream);
      auto piece = co_await upstream_->Next();
      if (cancelled_) {
        deliver(std::nullopt);
        co_return;
      }
      if (!piece) {
        bad = FailureOf(piece.error().kind);
        why = piece.error().text;
      } else if (!*piece) {
        bad = AttemptFailure::kClosed;
        why = "empty stream";
      } else {
        proxy_->metrics_->OnStreamMigration("resumed");
        spdlog::info("request {}: stream resumed on {} after {} tokens (migration {} of {})",
                     request_id_, route_.worker_name, streamed_->tokens(), migrations_,
                     proxy_->options_.max_migrations);
        deliver(Relay(std::move(**piece)));
        co_return;
      }
    }
    OnAttemptFailed(*bad, why);
    outcome = "failed";  // and another migration, while the limit allows
  }
  proxy_->metrics_->OnStreamMigration(outcome);
  EndWithErrorFrames(std::move(deliver));
}

void Exchange::EndWithErrorFrames(Deliver deliver) {
  proxy_->metrics_->OnError("upstream_failed_mid_stream");
  api::ApiError err = api::ApiError::Internal("the model server failed mid-stream");
  err.status = 502;
  upstream_.reset();
  Finish(false, 502);
  deliver(translator_ ? AnthropicStreamErrorEvent(err) : api::StreamErrorFrames(err));
}

}  // namespace kvroute::gateway
