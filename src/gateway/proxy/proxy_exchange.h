// Internal to the proxy (proxy.cc, proxy_exchange.cc, proxy_attempts.cc; included by nothing
// else): a proxy lane (`Lane`), the proxy's shared state (`Proxy::Impl`) and one proxied
// request (`Exchange`, its per-request state machine). Ownership: Proxy owns its Impl, the
// Impl its lanes; an Exchange is owned by shared_ptrs (its spawned coroutine, a pending read,
// a posted call) and points at the Impl and its lane. Thread safety: a Lane's and an
// Exchange's state are touched only on that lane's thread; Impl's counters are atomic.
#pragma once

// GCC 12 reports a false -Wmismatched-new-delete on Asio's coroutine frame allocator when one
// coroutine is inlined into another (Run → Attempts); the frame is allocated and freed by the
// same awaitable_frame_base operators. Before the includes, and in this header (which only
// the proxy's .cc files include), so that it covers every proxy translation unit.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

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
#include "gateway/proxy/proxy.h"
#include "gateway/proxy/pd_usage.h"
#include "gateway/proxy/proxy_sse_count.h"
#include "gateway/proxy/stream_migration.h"
#include "gateway/request_booking.h"
#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "fleet/router_state.h"
#include "net/body_queue.h"
#include "net/lane_pool.h"
#include "sched/plugin.h"

namespace kvroute::gateway {

namespace asio = boost::asio;

// One lane of the LanePool (a single-threaded io_context) with the proxy's per-lane state:
// everything of a request assigned to it runs on its thread, so a request's state needs no
// lock and ResponseStream::Cancel is safe to post here. With lanes shared with the HTTP
// server, a request's lane is its client connection's: a relayed chunk stays on one thread.
struct Lane {
  Lane(asio::io_context& context, std::uint64_t seed, const client::ClientOptions& options)
      : ctx(context),
        client(std::make_unique<client::AsyncHttpClient>(ctx.get_executor(), options)),
        state(seed) {}
  bool OnThisThread() const { return ctx.get_executor().running_in_this_thread(); }
  asio::io_context& ctx;  // owned by the LanePool
  std::unique_ptr<client::AsyncHttpClient> client;
  sched::PolicyState state;  // touched only on this lane's thread

  // A model's latency histograms. A RouterMetrics lookup builds a label map and a throwaway
  // histogram and takes the family's lock (prometheus-cpp's Family::Add); streams on this
  // lane look each model up once, not once per relayed chunk.
  struct Histograms {
    prometheus::Histogram* ttft;
    prometheus::Histogram* itl;
  };
  Histograms& HistogramsFor(RouterMetrics& metrics, std::string_view model) {
    auto it = histograms.find(model);
    if (it == histograms.end()) {
      it = histograms
               .emplace(std::string(model),
                        Histograms{&metrics.TtftHistogram(model), &metrics.ItlHistogram(model)})
               .first;
    }
    return it->second;
  }
  // Touched only on this lane's thread; one entry per model served (a request's model is
  // checked against the workers' before it is relayed), node addresses stable.
  std::map<std::string, Histograms, std::less<>> histograms;
};

class Proxy::Impl {
 public:
  Impl(ProxyOptions options, const RequestPipeline* pipeline, fleet::RouterState* router_state,
       RouterMetrics* metrics, ParityChecker* parity, const Clock* clock)
      : options_(options),
        pipeline_(pipeline),
        router_state_(router_state),
        metrics_(metrics),
        parity_(parity),
        clock_(clock),
        owns_lanes_(options.lanes_pool == nullptr),
        pool_(owns_lanes_ ? std::make_shared<net::LanePool>(options.lanes) : options.lanes_pool) {
    client::ClientOptions copts;
    copts.timeouts = options.timeouts;
    copts.max_body_bytes = options.max_response_bytes;
    copts.user_agent = "kvroute/0.1";
    for (int i = 0; i < pool_->size(); ++i) {
      lanes_.push_back(std::make_unique<Lane>(pool_->context(i), options.seed + i, copts));
    }
    const int compute = options.compute_threads < 0 ? DefaultComputeThreads(pool_->size())
                                                    : options.compute_threads;
    if (compute > 0) {
      compute_ = std::make_unique<net::LanePool>(compute);
      for (int i = 0; i < compute; ++i) {
        compute_states_.push_back(std::make_unique<sched::PolicyState>(options.seed + i));
      }
    }
  }

  ~Impl() { Stop(); }

  void Stop() {
    if (stopped_.exchange(true)) return;
    if (!owns_lanes_) {
      // Shared lanes outlive this call: let the exchanges the server's Shutdown cancelled
      // finish there (bounded), so that none is left queued holding this proxy.
      for (int i = 0; i < 500 && active_.load() != 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    std::vector<std::future<void>> closed;
    for (auto& lane : lanes_) {
      auto done = std::make_shared<std::promise<void>>();
      closed.push_back(done->get_future());
      Lane* l = lane.get();
      asio::post(l->ctx, [l, done] {
        l->client->CloseIdle();
        done->set_value();
      });
    }
    for (auto& f : closed) f.wait_for(std::chrono::seconds(2));
    // Work queued for it after this is never run (its exchange's frame is freed with the pool).
    if (compute_) compute_->Stop();
    // Streams still open (should be none after the server stopped) are abandoned.
    if (owns_lanes_) pool_->Stop();
  }

  // The lane of the request's client connection when the lanes are shared with the server,
  // else round robin.
  Lane& LaneFor(const net::HttpRequest& request) {
    if (!owns_lanes_ && request.lane >= 0 && request.lane < static_cast<int>(lanes_.size())) {
      return *lanes_[static_cast<std::size_t>(request.lane)];
    }
    return *lanes_[static_cast<std::size_t>(pool_->NextLane())];
  }

  const ProxyOptions options_;
  const RequestPipeline* const pipeline_;
  fleet::RouterState* const router_state_;
  RouterMetrics* const metrics_;
  ParityChecker* const parity_;
  const Clock* const clock_;
  const bool owns_lanes_;
  std::shared_ptr<net::LanePool> pool_;       // declared before lanes_: outlives their clients
  std::vector<std::unique_ptr<Lane>> lanes_;  // one per pool lane
  // Per-request CPU work (Prepare, Route); null when it runs inline on the lanes. Declared
  // after lanes_: destroyed first, while the lanes an unfinished hand-off returns to exist.
  std::unique_ptr<net::LanePool> compute_;
  // compute_states_[i] is touched only on compute thread i.
  std::vector<std::unique_ptr<sched::PolicyState>> compute_states_;
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::int64_t> active_{0};
  std::atomic<bool> stopped_{false};
};

// One proxied request. Lives on its lane's thread (every member below is touched only there,
// except through posted calls). Also the BodySource of a relayed stream.
class Exchange final : public net::BodySource, public std::enable_shared_from_this<Exchange> {
 public:
  // `arrived`: when the request reached kvroute; `body`: the client's, prepared (parsed,
  // tokenized, keyed) on the compute pool when the exchange runs. `endpoint` is ignored for
  // the Messages API.
  Exchange(Proxy::Impl* proxy, Lane* lane, ApiSurface surface, api::Endpoint endpoint,
           std::string body, RequestContext context, std::string request_id, Nanos arrived);
  ~Exchange() override;

  std::shared_ptr<net::DeferredSlot> MakeSlot();

  void Start();

  // net::BodySource (the relayed stream). Called by the client connection: on this lane
  // when the server shares the proxy's lanes (no hop), else from a server thread.
  void Pull(Deliver deliver) override;
  void Cancel() override { PostCancel(); }

 private:
  static asio::awaitable<void> Run(std::shared_ptr<Exchange> self) { co_await self->Attempts(); }

  void PostCancel();

  void CancelOnLane();

  net::HttpResponse ErrorReply(const api::ApiError& error) const;

  // What the compute pool hands back for a request's first attempt.
  struct Prepared {
    std::expected<PreparedRequest, api::ApiError> request = std::unexpected(api::ApiError{});
    std::optional<std::expected<RouteOutcome, api::ApiError>> route;  // when prepared
    Nanos prepare_time{0};
    Nanos route_time{0};
    bool booked = false;  // the route's load and prediction are already booked (BookRoute)
    bool booked_prefill = false;  // ... and a P/D prefill leg's (prefill_id())
  };
  // A retry's route, and what computing it took.
  struct Routed {
    std::optional<std::expected<RouteOutcome, api::ApiError>> route;
    Nanos route_time{0};
    bool booked = false;
    bool booked_prefill = false;
  };

  // Books a route's load and predicted blocks right where it was decided, on the compute
  // thread: the next decision (on any thread) must already see it. Booking after the hand-off
  // back to the lane let requests arriving together all read the same snapshot (8 turn 0s
  // decided within 80 ms, 5 sent to one worker). Reads only the arguments and const members,
  // so it is safe off the lane; the tracker and pipeline are thread-safe.
  void BookRoute(const PreparedRequest& request, const RouteOutcome& route, Nanos now) const;
  // Undoes BookRoute's load for a request cancelled before its attempt started.
  void UnbookRoute(bool with_prefill = false);

  // --- P/D (proxy/pd_exchange.cc). The prefill leg's booking id: the exchange's with the top
  // bit set (exchange ids count up from 1, so the two never meet).
  RequestId prefill_id() const { return id_ | (RequestId{1} << 63); }
  // Before a route placed by the P/D decision is sent: counts the placement and, when split,
  // runs the prefill leg on P. Its answer's kv_transfer_params make the decode leg's body
  // (attempt_body_); a failed or timed-out prefill leg re-books the request as aggregated on
  // its decode worker, which then gets the client's body (llm-d's fallback).
  asio::awaitable<void> RunPdLegs();
  // Releases the prefill leg's booking once (OnDone), whatever the outcome.
  void ReleasePrefillLeg(bool ok);
  void FallBackToLocalDecode(const std::string& reason, const std::string& detail);

  // Runs `fn(policy_state)` on a compute thread, with that thread's PolicyState, and resumes
  // on this lane with its result; inline on the lane (its PolicyState) without a compute
  // pool. `fn` must not touch this exchange's lane-owned state: the lane keeps running it
  // (a Cancel, say) meanwhile. A returned hand-off means the exchange was not destroyed, but
  // may have been cancelled.
  template <typename R, typename Fn>
  asio::awaitable<R> OnCompute(Fn fn) {
    net::LanePool* compute = proxy_->compute_.get();
    if (compute == nullptr || !offload_) co_return fn(lane_->state);
    const int k = compute->NextLane();
    sched::PolicyState* state = proxy_->compute_states_[static_cast<std::size_t>(k)].get();
    // A named coroutine rather than a lambda coroutine, and no `co_return co_await`: both
    // forms have miscompiled under GCC 12 (frames and temporaries freed twice).
    R result = co_await asio::co_spawn(compute->context(k), RunWork<R, Fn>(std::move(fn), state),
                                       asio::use_awaitable);
    co_return result;
  }
  template <typename R, typename Fn>
  static asio::awaitable<R> RunWork(Fn fn, sched::PolicyState* state) {
    R result = fn(*state);
    co_return result;
  }

  // Prepare and the first Route, in one hand-off.
  asio::awaitable<Prepared> PrepareAndRoute();

  // A retry's Route, excluding the workers tried. Reads request_, which the lane does not
  // change once prepared.
  asio::awaitable<Routed> RouteAgain(std::vector<WorkerId> tried);

  // Bytes for the client from one piece of the worker's stream: the piece itself (a split
  // request's usage merged: pd_usage.h), or (Messages API) its Anthropic translation,
  // possibly empty (the server skips empty pieces).
  std::string Relay(std::string piece);
  std::string Translate(std::string piece);

  // A buffered (non-streaming, or non-200) worker answer in the client's API.
  net::HttpResponse BufferedReply(int status, std::string content_type, std::string body);

  void Answer(net::HttpResponse response);

  client::ClientRequest UpstreamRequest() const;

  // The lane's side of a route (its load and prediction were booked by BookRoute when it
  // was decided): parity, metrics, the attempt's state.
  void OnRouted();

  // One attempt failed before the client saw anything.
  void OnAttemptFailed(AttemptFailure failure, const std::string& detail);

  void Finish(bool ok, int status);

  // Counts output tokens in relayed SSE bytes (one event with a choice = one token piece) and
  // books them (ResponseTokens, shared with the ext_proc picker); then TTFT/ITL and parity.
  void Observe(std::string_view piece);

  asio::awaitable<void> Attempts();

  void PullOnLane(Deliver deliver);

  // The upstream read a Pull started has completed: relay the piece, end the stream, or turn
  // a worker failure into a migration or error frames.
  void OnPiece(client::ResponseStream::NextResult piece);

  // --- Stream migration (proxy/stream_migration_exchange.cc): a worker failed mid-stream.
  // Whether this stream may still be resumed elsewhere (enabled, within the limit).
  bool MayMigrate() const;
  // Resumes the stream on another worker; `deliver` (the Pull the failed read answered) gets
  // the continuation's first bytes, or the error frames when no migration succeeded.
  void StartMigration(AttemptFailure failure, std::string detail, Deliver deliver);
  static asio::awaitable<void> RunMigration(std::shared_ptr<Exchange> self,
                                            AttemptFailure failure, std::string detail,
                                            Deliver deliver) {
    co_await self->Migrate(failure, std::move(detail), std::move(deliver));
  }
  asio::awaitable<void> Migrate(AttemptFailure failure, std::string detail, Deliver deliver);
  // Today's end of a stream whose worker failed: an error event, then [DONE].
  void EndWithErrorFrames(Deliver deliver);

  Proxy::Impl* const proxy_;
  Lane* const lane_;
  const bool anthropic_;  // the client spoke the Messages API: translate answers
  const api::Endpoint endpoint_;
  std::string client_body_;  // until the compute pool takes it
  const RequestContext context_;  // the tenant's salt
  PreparedRequest request_;  // set on the lane once prepared; read-only afterwards
  std::optional<AnthropicStreamTranslator> translator_;  // Messages API streams only
  const std::string request_id_;
  const RequestId id_;
  const Nanos arrived_;
  const bool offload_;  // Prepare/Route on the compute pool (a big body), else inline

  std::shared_ptr<net::DeferredSlot> slot_;
  RouteOutcome route_;
  std::unique_ptr<client::ResponseStream> upstream_;
  std::optional<asio::steady_timer> cancel_signal_;  // cancelled when the client leaves
  std::optional<std::string> preloaded_;
  Deliver pending_deliver_;                 // the Pull an upstream read is answering
  ResponseTokens response_tokens_{proxy_->router_state_, id_};  // counts and books relayed tokens
  Lane::Histograms* histograms_ = nullptr;  // the model's, from the first token on
  // Messages API streams only: the events the translator turns into Anthropic's.
  api::SseParser sse_;
  std::vector<api::SseMessage> events_;
  std::optional<Nanos> first_token_at_;
  std::optional<Nanos> last_token_at_;
  std::uint64_t tokens_ = 0;
  // P/D, per attempt: the decode leg's body (null: request_.body), the prefill leg's
  // cached_tokens for the merged usage, its worker (x-kvroute-prefill-worker).
  std::shared_ptr<const std::string> attempt_body_;
  std::optional<std::uint64_t> prefill_cached_tokens_;
  std::optional<SseUsageRewriter> usage_rewriter_;
  std::string prefill_worker_name_;
  bool prefill_open_ = false;  // the prefill leg's booking is not released yet
  // Stream migration: the text streamed so far (streams only, when max_migrations > 0), the
  // filter of the continuation being relayed, the workers tried (never tried again).
  std::optional<StreamedText> streamed_;
  std::optional<ContinuationRelay> continuation_;
  std::vector<WorkerId> tried_;
  int migrations_ = 0;
  int attempts_ = 0;
  bool routed_ = false;
  bool answered_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  bool stream_error_ = false;
};

}  // namespace kvroute::gateway
