#include "gateway/request_booking.h"

#include "fleet/router_state.h"

namespace kvroute::gateway {

void BookRoute(fleet::RouterState& state, const RequestPipeline& pipeline, RequestId id,
               const PreparedRequest& request, const RouteOutcome& route, Nanos now) {
  state.Book(id, route.booking, now);
  pipeline.OnRouted(request, route, now);
}

void BookPdRoute(fleet::RouterState& state, const RequestPipeline& pipeline, RequestId id,
                 RequestId prefill_id, const PreparedRequest& request, const RouteOutcome& route,
                 Nanos now) {
  state.Book(prefill_id, route.prefill->booking, now);
  state.Book(id, route.booking, now);
  pipeline.OnRoutedTo(request, route.prefill->worker, now);
  pipeline.OnRoutedTo(request, route.worker, now);
}

ResponseTokens::Step ResponseTokens::Observe(std::string_view piece, Nanos now) {
  const SseTokenCounter::Counts counts = counter_.Feed(piece);
  Step step{.tokens = counts.tokens, .error = counts.error, .done = counts.done};
  if (counts.done) done_ = true;
  if (step.tokens == 0) return step;
  if (!started_) {
    started_ = true;
    step.first = true;
    state_->OnFirstToken(id_, now);
    // Tokens that came with the first one are KV, not an interval: booked at once.
    if (step.tokens > 1) state_->OnToken(id_, now, step.tokens - 1);
  } else {
    // Reported in windows of a few tokens, not per piece (fleet::TokenBatcher says why).
    batcher_.Add(*state_, id_, now, step.tokens);
  }
  tokens_ += step.tokens;
  return step;
}

void ResponseTokens::ObserveBuffered(Nanos now) {
  if (started_) return;
  started_ = true;
  state_->OnFirstToken(id_, now);
}

void ResponseTokens::Flush() { batcher_.Flush(*state_, id_); }

}  // namespace kvroute::gateway
