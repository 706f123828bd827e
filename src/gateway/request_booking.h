// The booking side of one routed request, shared by kvroute's two front ends: the HTTP proxy
// (proxy_exchange.cc) and the ext_proc Endpoint Picker (extproc/epp_router.cc). Both decide
// with RequestPipeline::Route and then book and release through these, so a request routed by
// either is accounted for identically in fleet::RouterState:
//
//   BookRoute        the decision is made: RouterState::Book (load, pending prefill, KV) and
//                    the predicted prefix on the chosen worker (RequestPipeline::OnRouted)
//   ResponseTokens   the response's SSE bytes as they are relayed: the first token event →
//                    OnFirstToken (plus the rest of its piece), later ones in TokenBatcher
//                    windows → OnToken; Flush at the end of a good stream; a buffered
//                    answer's first bytes → OnFirstToken (ObserveBuffered)
//   (the caller)     RouterState::OnDone at the end, RouterState::Cancel if the worker never
//                    got the request
//
// Thread safety: BookRoute is safe from any thread (RouterState and the pipeline's
// collaborators are). A ResponseTokens belongs to one stream and is used by one thread at a
// time.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/types.h"
#include "fleet/load_tracker.h"
#include "gateway/proxy/proxy_sse_count.h"
#include "gateway/request_pipeline.h"

namespace kvroute::fleet {
class RouterState;
}

namespace kvroute::gateway {

// Books `route` for request `id` at `now`: its load in the router state, then its prefix as
// predicted on the chosen worker. Call once per routed attempt, right where it was decided
// (the next decision on any thread must see it).
void BookRoute(fleet::RouterState& state, const RequestPipeline& pipeline, RequestId id,
               const PreparedRequest& request, const RouteOutcome& route, Nanos now);

// The same for a route split by the P/D decision (route.prefill set): the prefill leg booked
// on P under `prefill_id`, the decode leg on the route's worker under `id`, and the prefix
// predicted on both (D announces the blocks it pulls). The proxy's only.
void BookPdRoute(fleet::RouterState& state, const RequestPipeline& pipeline, RequestId id,
                 RequestId prefill_id, const PreparedRequest& request, const RouteOutcome& route,
                 Nanos now);

// Counts the token events of a streamed response and books them on request `id`.
class ResponseTokens {
 public:
  struct Step {
    std::uint32_t tokens = 0;  // token events completed by this piece
    bool first = false;        // the piece carried the request's first token
    bool error = false;        // an error event was seen
    bool done = false;         // the stream's closing [DONE] event was seen
  };

  ResponseTokens(fleet::RouterState* state, RequestId id) : state_(state), id_(id) {}

  // One relayed piece of SSE bytes, seen at `now`.
  Step Observe(std::string_view piece, Nanos now);
  // A buffered (non-streamed) 200 answer's first bytes arrived at `now`: its first token, as
  // far as the router can tell (OnFirstToken once; later calls do nothing).
  void ObserveBuffered(Nanos now);
  // The stream ended well: the last window's decode sample (call before OnDone).
  void Flush();
  // A new attempt (retry): counting starts again.
  void Reset() { *this = ResponseTokens(state_, id_); }

  std::uint64_t tokens() const { return tokens_; }
  bool started() const { return started_; }
  // The relayed stream has ended with [DONE]: the client has every byte it will get.
  bool done() const { return done_; }

 private:
  fleet::RouterState* state_;
  RequestId id_;
  SseTokenCounter counter_;
  fleet::TokenBatcher batcher_;
  std::uint64_t tokens_ = 0;
  bool started_ = false;
  bool done_ = false;
};

}  // namespace kvroute::gateway
