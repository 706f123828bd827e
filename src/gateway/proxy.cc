#include "gateway/proxy.h"

// GCC 12 reports a false -Wmismatched-new-delete on Asio's coroutine frame allocator when one
// coroutine is inlined into another (Run → Attempts); the frame is allocated and freed by the
// same awaitable_frame_base operators.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

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
#include "gateway/proxy_sse_count.h"
#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "gateway/worker_registry.h"
#include "net/body_queue.h"
#include "net/lane_pool.h"
#include "sched/plugin.h"

namespace kvroute::gateway {

namespace asio = boost::asio;

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

int DefaultComputeThreads(int lanes) { return std::max(1, lanes / 2); }

std::optional<AttemptFailure> FailureOfStatus(int status) {
  if (status == 502 || status == 503 || status == 504) return AttemptFailure::kUnavailable;
  if (status == 500) return AttemptFailure::kServerError;
  return std::nullopt;
}

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
  Impl(ProxyOptions options, const RequestPipeline* pipeline, WorkerRegistry* registry,
       RouterMetrics* metrics, ParityChecker* parity, const Clock* clock)
      : options_(options),
        pipeline_(pipeline),
        registry_(registry),
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
  WorkerRegistry* const registry_;
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

namespace {

// One proxied request. Lives on its lane's thread (every member below is touched only there,
// except through posted calls). Also the BodySource of a relayed stream.
class Exchange final : public net::BodySource, public std::enable_shared_from_this<Exchange> {
 public:
  // `arrived`: when the request reached kvroute; `body`: the client's, prepared (parsed,
  // tokenized, keyed) on the compute pool when the exchange runs. `endpoint` is ignored for
  // the Messages API.
  Exchange(Proxy::Impl* proxy, Lane* lane, ApiSurface surface, api::Endpoint endpoint,
           std::string body, std::string request_id, Nanos arrived)
      : proxy_(proxy),
        lane_(lane),
        anthropic_(surface == ApiSurface::kAnthropic),
        endpoint_(endpoint),
        client_body_(std::move(body)),
        request_id_(std::move(request_id)),
        id_(proxy->next_id_.fetch_add(1)),
        arrived_(arrived),
        offload_(client_body_.size() >= proxy->options_.compute_min_body_bytes) {
    proxy_->active_.fetch_add(1);
    proxy_->metrics_->InflightDelta(1);
  }
  ~Exchange() override {
    proxy_->active_.fetch_sub(1);
    proxy_->metrics_->InflightDelta(-1);
  }

  std::shared_ptr<net::DeferredSlot> MakeSlot() {
    std::weak_ptr<Exchange> weak = weak_from_this();
    slot_ = std::make_shared<net::DeferredSlot>([weak] {
      if (auto self = weak.lock()) self->PostCancel();
    });
    return slot_;
  }

  void Start() {
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

  // net::BodySource (the relayed stream). Called by the client connection: on this lane
  // when the server shares the proxy's lanes (no hop), else from a server thread.
  void Pull(Deliver deliver) override {
    if (lane_->OnThisThread()) return PullOnLane(std::move(deliver));
    auto self = shared_from_this();
    asio::post(lane_->ctx, [self, deliver = std::move(deliver)]() mutable {
      self->PullOnLane(std::move(deliver));
    });
  }
  void Cancel() override { PostCancel(); }

 private:
  static asio::awaitable<void> Run(std::shared_ptr<Exchange> self) { co_await self->Attempts(); }

  void PostCancel() {
    auto self = shared_from_this();
    asio::post(lane_->ctx, [self] { self->CancelOnLane(); });
  }

  void CancelOnLane() {
    if (cancelled_) return;
    cancelled_ = true;
    if (cancel_signal_) cancel_signal_->cancel();
    if (upstream_) upstream_->Cancel();
    if (routed_ && !finished_) {
      proxy_->metrics_->OnError("client_cancelled");
      Finish(false, 499);
    }
  }

  net::HttpResponse ErrorReply(const api::ApiError& error) const {
    return ErrorResponse(anthropic_ ? ApiSurface::kAnthropic : ApiSurface::kOpenAi, error,
                         request_id_);
  }

  // What the compute pool hands back for a request's first attempt.
  struct Prepared {
    std::expected<PreparedRequest, api::ApiError> request = std::unexpected(api::ApiError{});
    std::optional<std::expected<RouteOutcome, api::ApiError>> route;  // when prepared
    Nanos prepare_time{0};
    Nanos route_time{0};
    bool booked = false;  // the route's load and prediction are already booked (BookRoute)
  };
  // A retry's route, and what computing it took.
  struct Routed {
    std::optional<std::expected<RouteOutcome, api::ApiError>> route;
    Nanos route_time{0};
    bool booked = false;
  };

  // Books a route's load and predicted blocks right where it was decided, on the compute
  // thread: the next decision (on any thread) must already see it. Booking after the hand-off
  // back to the lane let requests arriving together all read the same snapshot (8 turn 0s
  // decided within 80 ms, 5 sent to one worker). Reads only the arguments and const members,
  // so it is safe off the lane; the tracker and pipeline are thread-safe.
  void BookRoute(const PreparedRequest& request, const RouteOutcome& route, Nanos now) const {
    RoutedRequest rr;
    rr.worker = route.worker;
    rr.prompt_tokens = static_cast<std::uint64_t>(std::max<std::int64_t>(request.prompt_tokens, 0));
    rr.uncached_tokens = route.uncached_tokens;
    rr.kv_blocks = route.kv_blocks;
    proxy_->registry_->load().OnRouted(id_, rr, now);
    proxy_->pipeline_->OnRouted(request, route, now);
  }
  // Undoes BookRoute's load for a request cancelled before its attempt started.
  void UnbookRoute() { proxy_->registry_->load().OnDone(id_, proxy_->clock_->Now(), false); }

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
  asio::awaitable<Prepared> PrepareAndRoute() {
    auto self = shared_from_this();
    return OnCompute<Prepared>([self,
                                body = std::move(client_body_)](sched::PolicyState& state) mutable {
      Prepared out;
      const Clock* clock = self->proxy_->clock_;
      const RequestPipeline* pipeline = self->proxy_->pipeline_;
      Nanos t0 = clock->Now();
      // The body moves into the prepared request, which every attempt then shares.
      out.request = self->anthropic_
                        ? pipeline->PrepareMessages(body, self->arrived_)
                        : pipeline->PrepareOwned(self->endpoint_, std::move(body), self->arrived_);
      Nanos t1 = clock->Now();
      out.prepare_time = t1 - t0;
      if (out.request) {
        out.route.emplace(pipeline->Route(*out.request, {}, t1, state));
        const Nanos t2 = clock->Now();
        out.route_time = t2 - t1;
        if (out.route->has_value()) {
          self->BookRoute(*out.request, **out.route, t2);
          out.booked = true;
        }
      }
      return out;
    });
  }

  // A retry's Route, excluding the workers tried. Reads request_, which the lane does not
  // change once prepared.
  asio::awaitable<Routed> RouteAgain(std::vector<WorkerId> tried) {
    auto self = shared_from_this();
    return OnCompute<Routed>([self, tried = std::move(tried)](sched::PolicyState& state) {
      Routed out;
      const Clock* clock = self->proxy_->clock_;
      Nanos t0 = clock->Now();
      out.route.emplace(self->proxy_->pipeline_->Route(self->request_, tried, t0, state));
      const Nanos t1 = clock->Now();
      out.route_time = t1 - t0;
      if (out.route->has_value()) {
        self->BookRoute(self->request_, **out.route, t1);
        out.booked = true;
      }
      return out;
    });
  }

  // Bytes for the client from one piece of the worker's stream: the piece itself, or (Messages
  // API) its Anthropic translation, possibly empty (the server skips empty pieces).
  std::string Relay(std::string piece) {
    Observe(piece);
    if (!translator_) return piece;
    events_.clear();
    std::string out;
    if (!sse_.Feed(piece, events_)) return out;
    for (const auto& e : events_) translator_->OnEvent(e, &out);
    return out;
  }

  // A buffered (non-streaming, or non-200) worker answer in the client's API.
  net::HttpResponse BufferedReply(int status, std::string content_type, std::string body) {
    net::HttpResponse r;
    r.status = status;
    r.content_type = content_type.empty() ? "application/json" : std::move(content_type);
    r.body = std::move(body);
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
    return r;
  }

  void Answer(net::HttpResponse response) {
    if (answered_) return;
    answered_ = true;
    slot_->Set(std::move(response));
  }

  client::ClientRequest UpstreamRequest() const {
    client::ClientRequest r;
    auto url = client::ParseUrl(route_.base_url);
    if (url) {
      r.host = url->host;
      r.port = url->port;
    }
    r.method = "POST";
    r.target = request_.endpoint == api::Endpoint::kCompletions ? "/v1/completions"
                                                                : "/v1/chat/completions";
    r.shared_body = request_.body;  // shared by every attempt, never copied
    r.content_type = "application/json";
    r.headers.emplace_back("x-request-id", request_id_);
    return r;
  }

  // The lane's side of a route (its load and prediction were booked by BookRoute when it
  // was decided): parity, metrics, the attempt's state.
  void OnRouted() {
    Nanos now = proxy_->clock_->Now();
    routed_ = true;
    finished_ = false;
    first_token_at_.reset();
    last_token_at_.reset();
    tokens_ = 0;
    tokens_to_book_ = TokenBatcher();
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

  // One attempt failed before the client saw anything.
  void OnAttemptFailed(AttemptFailure failure, const std::string& detail) {
    Nanos now = proxy_->clock_->Now();
    spdlog::warn("request {}: worker {} failed ({}: {})", request_id_, route_.worker_name,
                 AttemptFailureName(failure), detail);
    // 502/503/504 mean busy, draining or a gateway in between: not the worker's own fault.
    if (failure != AttemptFailure::kUnavailable) {
      proxy_->registry_->health().OnFailure(route_.worker, now);
    }
    proxy_->registry_->load().OnDone(id_, now, false);
    if (proxy_->parity_ != nullptr) proxy_->parity_->OnFailed(id_);
    routed_ = false;
    upstream_.reset();
  }

  void Finish(bool ok, int status) {
    if (finished_) return;
    finished_ = true;
    Nanos now = proxy_->clock_->Now();
    if (routed_) {
      proxy_->registry_->load().OnDone(id_, now, ok);
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

  // Counts output tokens in relayed SSE bytes (one event with a choice = one token piece).
  // (SseTokenCounter scans the bytes in place: no event values are built for this.)
  void Observe(std::string_view piece) {
    const SseTokenCounter::Counts counts = token_counter_.Feed(piece);
    if (counts.error) stream_error_ = true;
    const std::uint32_t n = counts.tokens;
    if (n == 0) return;
    Nanos now = proxy_->clock_->Now();
    if (!first_token_at_) {
      first_token_at_ = now;
      proxy_->registry_->load().OnFirstToken(id_, now);
      if (proxy_->parity_ != nullptr) proxy_->parity_->OnFirstToken(id_, now);
      histograms_ = &lane_->HistogramsFor(*proxy_->metrics_, request_.model);
      histograms_->ttft->Observe(ToSeconds(now - arrived_));
      // Tokens that came with the first one are KV, not an interval: booked at once.
      if (n > 1) proxy_->registry_->load().OnToken(id_, now, n - 1);
    } else {
      // Reported in windows of a few tokens, not per piece (TokenBatcher says why).
      tokens_to_book_.Add(proxy_->registry_->load(), id_, now, n);
      histograms_->itl->Observe(ToSeconds(now - *last_token_at_) / n);
    }
    last_token_at_ = now;
    tokens_ += n;
  }

  asio::awaitable<void> Attempts() {
    const int max_attempts = std::max(1, proxy_->options_.max_attempts);
    std::vector<WorkerId> tried;
    api::ApiError last_error = api::ApiError::Overloaded("no worker could serve this request");
    last_error.status = 502;
    Prepared prepared = co_await PrepareAndRoute();
    if (cancelled_) {
      if (prepared.booked) UnbookRoute();
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
    // The decision latency: CPU work only (parse, tokenize, key, route), not the hand-offs.
    proxy_->metrics_->ObserveDecision(ToSeconds(prepared.prepare_time + prepared.route_time));
    std::optional<std::expected<RouteOutcome, api::ApiError>> next = std::move(prepared.route);
    while (!cancelled_) {
      if (!next) {
        Routed again = co_await RouteAgain(tried);
        if (cancelled_) {
          if (again.booked) UnbookRoute();
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
              proxy_->registry_->load().OnFirstToken(id_, t);
              if (proxy_->parity_ != nullptr) proxy_->parity_->OnFirstToken(id_, t);
            }
            body += **piece;
          }
          if (!failure) {
            net::HttpResponse r = BufferedReply(
                status, std::string(upstream_->Header("content-type")), std::move(body));
            upstream_.reset();
            proxy_->registry_->health().OnSuccess(route_.worker, proxy_->clock_->Now());
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
        last_error.message = "the worker failed before answering (" +
                             std::string(AttemptFailureName(*failure)) + ")";
        proxy_->metrics_->OnError("upstream_" + std::string(AttemptFailureName(*failure)));
        Answer(ErrorReply(last_error));
        Finish(false, last_error.status);
        co_return;
      }
      proxy_->metrics_->OnRetry(AttemptFailureName(*failure));
    }
  }

  void PullOnLane(Deliver deliver) {
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

  // The upstream read a Pull started has completed: relay the piece, end the stream, or turn
  // a worker failure into error frames.
  void OnPiece(client::ResponseStream::NextResult piece) {
    Deliver deliver = std::move(pending_deliver_);
    if (cancelled_) {
      deliver(std::nullopt);
      return;
    }
    if (!piece) {
      // The worker failed mid-stream: the status line is long gone, so end the stream with
      // an error event the client can read, then [DONE].
      AttemptFailure f = FailureOf(piece.error().kind);
      spdlog::warn("request {}: worker {} failed mid-stream ({}: {})", request_id_,
                   route_.worker_name, AttemptFailureName(f), piece.error().text);
      proxy_->registry_->health().OnFailure(route_.worker, proxy_->clock_->Now());
      proxy_->metrics_->OnError("upstream_failed_mid_stream");
      api::ApiError err = api::ApiError::Internal("the model server failed mid-stream");
      err.status = 502;
      upstream_.reset();
      Finish(false, 502);
      deliver(translator_ ? AnthropicStreamErrorEvent(err) : api::StreamErrorFrames(err));
      return;
    }
    if (!*piece) {
      upstream_.reset();
      tokens_to_book_.Flush(proxy_->registry_->load(), id_);  // the last window's sample
      proxy_->registry_->health().OnSuccess(route_.worker, proxy_->clock_->Now());
      Finish(!stream_error_, 200);
      // A translated stream may still owe its closing events; the next Pull ends the body.
      std::string tail;
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

  Proxy::Impl* const proxy_;
  Lane* const lane_;
  const bool anthropic_;  // the client spoke the Messages API: translate answers
  const api::Endpoint endpoint_;
  std::string client_body_;  // until the compute pool takes it
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
  SseTokenCounter token_counter_;           // counts the relayed tokens
  TokenBatcher tokens_to_book_;             // decode tokens not yet reported to the tracker
  Lane::Histograms* histograms_ = nullptr;  // the model's, from the first token on
  // Messages API streams only: the events the translator turns into Anthropic's.
  api::SseParser sse_;
  std::vector<api::SseMessage> events_;
  std::optional<Nanos> first_token_at_;
  std::optional<Nanos> last_token_at_;
  std::uint64_t tokens_ = 0;
  int attempts_ = 0;
  bool routed_ = false;
  bool answered_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  bool stream_error_ = false;
};

}  // namespace

Proxy::Proxy(ProxyOptions options, const RequestPipeline* pipeline, WorkerRegistry* registry,
             RouterMetrics* metrics, ParityChecker* parity, const Clock* clock)
    : impl_(std::make_shared<Impl>(options, pipeline, registry, metrics, parity, clock)) {}

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
  auto exchange = std::make_shared<Exchange>(impl_.get(), &lane, surface, endpoint,
                                             std::move(request.body), std::move(request_id), now);
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
