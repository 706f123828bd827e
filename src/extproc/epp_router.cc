#include "extproc/epp_router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "client/client_types.h"
#include "common/clock.h"
#include "extproc/epp_fairness.h"
#include "fleet/router_state.h"
#include "gateway/proxy/proxy.h"
#include "gateway/request_booking.h"
#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "net/http_types.h"

namespace kvroute::extproc {
namespace {

constexpr RequestId kEppIdBit = RequestId{1} << 63;

struct Shared {
  gateway::RequestPath path;
  EppRouterOptions options;
  std::shared_ptr<EppPolicy> policy;  // never null
  FairShareLedger fairness;
  std::atomic<std::uint64_t> next_id{1};
  std::atomic<std::uint64_t> next_key{0};  // rewrite keys of requests without x-request-id
  std::atomic<std::uint64_t> next_seed{0};
};

// The worker's endpoint as the gateway names it: host:port of its base URL.
std::string EndpointOf(const std::string& base_url) {
  auto url = client::ParseUrl(base_url);
  return url ? url->host + ":" + std::to_string(url->port) : base_url;
}

sched::PolicyState& ThreadPolicyState(Shared& shared) {
  thread_local std::unique_ptr<sched::PolicyState> state;
  if (!state) state = std::make_unique<sched::PolicyState>(shared.options.seed + shared.next_seed++);
  return *state;
}

class RouterSession final : public PickSession {
 public:
  explicit RouterSession(std::shared_ptr<Shared> shared)
      : shared_(std::move(shared)), state_(*shared_->path.router_state) {}
  ~RouterSession() override { ReleaseFairness(); }

  PickResult Pick(const PickRequest& r) override {
    const Nanos now = shared_->path.clock->Now();
    std::string_view path = Header(r, ":path");
    path = path.substr(0, path.find('?'));
    std::optional<api::Endpoint> endpoint;
    if (path == "/v1/chat/completions") endpoint = api::Endpoint::kChatCompletions;
    if (path == "/v1/completions") endpoint = api::Endpoint::kCompletions;
    // Not an inference request: nothing to prepare or book. (An inference path without a body
    // is prepared as one, and refused 400 like the HTTP path refuses it.)
    if (!endpoint) return AnyRoutable(r, now);

    const gateway::RequestPipeline& pipeline = *shared_->path.pipeline;
    net::HttpRequest http;  // what the tenancy rule reads: the headers
    for (const auto& [k, v] : r.headers) http.headers.emplace_back(k, v);
    const EppPolicy& policy = *shared_->policy;
    const RequestObjective objective =
        ReadObjective(r.headers, [&policy](std::string_view o) { return policy.Priority(o); });
    gateway::RequestContext context{.tenant_salt = pipeline.TenantSalt(http)};
    // The model the request is checked, scored, booked and forwarded as (the forwarded body's
    // "model" rewritten, Content-Length following): x-gateway-model-name-rewrite names it
    // outright; else the pool's InferenceModelRewrite rules, weighted per request
    // (epp_policy.h: the key is x-request-id's hash, else a counter).
    const std::string_view request_id = Header(r, "x-request-id");
    const std::uint64_t key = request_id.empty() ? shared_->next_key++ : StableHash(request_id);
    context.rewrite_model = [&objective, &policy, key](std::string_view model) {
      return objective.model_rewrite.empty() ? policy.RewriteFor(model, key) : objective.model_rewrite;
    };
    auto prepared = pipeline.Prepare(*endpoint, r.body, now, context);
    if (!prepared) return Reject(prepared.error());
    request_ = std::move(*prepared);
    if (!request_.requested_model.empty()) {
      spdlog::debug("epp model rewrite {} -> {}", request_.requested_model, request_.model);
    }
    const std::optional<std::string> saturated = EveryCandidateSaturated(r, now);
    if (objective.sheddable() && saturated) {
      spdlog::info("epp shed model={} objective={} priority={} fairness_id={}: every candidate saturated ({})",
                   request_.model, objective.objective, objective.priority, objective.fairness_id, *saturated);
      return Reject(api::ApiError{
          .status = 429,
          .message = "Request shed: objective '" + objective.objective +
                     "' is sheddable and every endpoint is saturated (" + *saturated + "); retry later.",
          .type = "rate_limit_error",
          .code = "sheddable_request_shed"});
    }
    // Fairness (epp_fairness.h): in a saturated pool, an id holding more than its share of
    // this priority's requests in flight is refused; otherwise the request is counted.
    const FairShareVerdict fair =
        shared_->fairness.Admit(objective.priority, objective.fairness_id, saturated.has_value());
    if (fair.over) {
      spdlog::info("epp shed model={} priority={} fairness_id={}: holds {} of {} in flight (share {:.2f} among {})",
                   request_.model, objective.priority, objective.fairness_id, fair.held, fair.in_flight,
                   fair.share, fair.ids);
      return Reject(api::ApiError{
          .status = 429,
          .message = "Request shed: fairness id '" + objective.fairness_id + "' holds " + std::to_string(fair.held) +
                     " of the " + std::to_string(fair.in_flight) + " requests in flight at priority " +
                     std::to_string(objective.priority) + ", more than its fair share among " +
                     std::to_string(fair.ids) + ", and every endpoint is saturated (" + *saturated +
                     "); retry later.",
          .type = "rate_limit_error",
          .code = "fairness_share_exceeded"});
    }
    fair_priority_ = objective.priority;
    fair_id_ = objective.fairness_id;
    fair_counted_ = true;

    std::vector<WorkerId> exclude = OutsideSubset(r);
    PickResult out;
    for (int k = 0; k <= shared_->options.max_fallbacks; ++k) {
      auto route = pipeline.Route(request_, exclude, now, ThreadPolicyState(*shared_));
      if (!route) {
        if (k == 0) {
          ReleaseFairness();  // never routed
          return Reject(route.error());
        }
        break;
      }
      exclude.push_back(route->worker);
      out.endpoints.push_back(EndpointOf(route->base_url));
      routes_.push_back(std::move(*route));
    }
    Book(0, now);
    shared_->path.metrics->AddPromptTokens(static_cast<double>(std::max<std::int64_t>(request_.prompt_tokens, 0)));
    if (*request_.body != r.body) out.body = *request_.body;  // a salt, uuids, the rewritten model
    return out;
  }

  void OnResponseHeaders(int status, bool sse, const std::optional<std::string>& served) override {
    status_ = status;
    sse_ = sse;
    if (!booked_ || !served || routes_.empty()) return;
    for (std::size_t i = 1; i < routes_.size(); ++i) {
      if (EndpointOf(routes_[i].base_url) != *served) continue;
      // The gateway used a fallback: the load is that worker's, not the pick's.
      const Nanos now = shared_->path.clock->Now();
      state_.Cancel(id_, now);
      Book(i, now);
      break;
    }
  }

  void OnResponseBody(std::string_view bytes, bool /*end_of_stream*/) override {
    if (!booked_) return;
    const Nanos now = shared_->path.clock->Now();
    if (sse_) {
      if (tokens_->Observe(bytes, now).error) stream_error_ = true;
    } else if (status_ == 200 && !bytes.empty()) {
      tokens_->ObserveBuffered(now);
    }
  }

  void OnStreamEnd(bool response_complete, bool destination_sent) override {
    ReleaseFairness();
    if (!booked_) return;
    const Nanos now = shared_->path.clock->Now();
    const gateway::RouteOutcome& route = routes_[booked_index_];
    if (!destination_sent) {
      state_.Cancel(id_, now);  // the worker never got it
      return;
    }
    const bool ok = response_complete && status_ == 200 && !stream_error_;
    if (ok) tokens_->Flush();
    if (auto failure = gateway::FailureOfStatus(status_);
        failure == gateway::AttemptFailure::kServerError) {
      state_.health().OnFailure(route.worker, now);
    } else if (ok) {
      state_.health().OnSuccess(route.worker, now);
    }
    state_.OnDone(id_, now, ok);
    const int status = response_complete ? status_ : 499;
    shared_->path.metrics->OnRequestDone(request_.model, route.worker_name, status);
    spdlog::info("epp request model={} worker={} status={} stream={} prompt_tokens={} "
                 "cached_blocks={} tokens={}{}",
                 request_.model, route.worker_name, status, request_.stream,
                 request_.prompt_tokens, route.cached_any_blocks, tokens_->tokens(),
                 route.fell_back ? " fell_back" : "");
  }

 private:
  static std::string_view Header(const PickRequest& r, const std::string& name) {
    auto it = r.headers.find(name);
    return it == r.headers.end() ? std::string_view() : std::string_view(it->second);
  }

  static PickResult Reject(const api::ApiError& error) {
    return PickResult{.reject_status = error.status, .reject_message = error.Body()};
  }

  void ReleaseFairness() {
    if (!fair_counted_) return;
    fair_counted_ = false;
    shared_->fairness.Release(fair_priority_, fair_id_);
  }

  // Books routes_[i] under a fresh id (a moved booking never reuses the withdrawn one).
  void Book(std::size_t i, Nanos now) {
    id_ = kEppIdBit | shared_->next_id++;
    gateway::BookRoute(state_, *shared_->path.pipeline, id_, request_, routes_[i], now);
    tokens_.emplace(&state_, id_);
    booked_ = true;
    booked_index_ = i;
  }

  // Workers whose endpoint the gateway's subset hint leaves out (none when there is no hint).
  std::vector<WorkerId> OutsideSubset(const PickRequest& r) const {
    std::vector<WorkerId> out;
    if (!r.subset) return out;
    for (const auto& w : state_.List()) {
      const std::string e = EndpointOf(w.spec.base_url);
      if (std::find(r.subset->begin(), r.subset->end(), e) == r.subset->end()) out.push_back(w.id);
    }
    return out;
  }

  // When every routable worker the subset hint allows is saturated, what each one is
  // ("w0: queue full, w1: kv full"); nullopt when one has room, or there is none (Route then
  // answers 503 as it would).
  std::optional<std::string> EveryCandidateSaturated(const PickRequest& r, Nanos now) const {
    std::string why;
    for (const auto& w : state_.List()) {
      if (!state_.health().Routable(w.id, now)) continue;
      if (r.subset && std::find(r.subset->begin(), r.subset->end(), EndpointOf(w.spec.base_url)) == r.subset->end()) {
        continue;
      }
      const Saturation s = WorkerSaturation(state_.Metrics(w.id), now, shared_->options.admission);
      if (s == Saturation::kRoom) return std::nullopt;
      why += (why.empty() ? "" : ", ") + w.spec.name + ": " + SaturationName(s);
    }
    if (why.empty()) return std::nullopt;
    return why;
  }

  // A request without an inference body (GET /v1/models, say): any routable worker, fewest in
  // flight first. Not booked: it costs the worker nothing the router models.
  PickResult AnyRoutable(const PickRequest& r, Nanos now) const {
    std::vector<std::pair<std::int64_t, std::string>> ranked;
    for (const auto& w : state_.List()) {
      if (!state_.health().Routable(w.id, now)) continue;
      std::string e = EndpointOf(w.spec.base_url);
      if (r.subset && std::find(r.subset->begin(), r.subset->end(), e) == r.subset->end()) continue;
      ranked.emplace_back(static_cast<std::int64_t>(state_.load().Load(w.id).inflight_requests), std::move(e));
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    PickResult out;
    for (auto& [load, e] : ranked) out.endpoints.push_back(std::move(e));
    return out;
  }

  std::shared_ptr<Shared> shared_;
  fleet::RouterState& state_;
  gateway::PreparedRequest request_;
  std::vector<gateway::RouteOutcome> routes_;  // the pick, then its fallbacks
  std::optional<gateway::ResponseTokens> tokens_;
  RequestId id_ = 0;
  std::size_t booked_index_ = 0;
  bool booked_ = false;
  int status_ = 0;
  bool sse_ = false;
  bool stream_error_ = false;
  // The fairness ledger's count this request holds (released once, at the end).
  bool fair_counted_ = false;
  int fair_priority_ = 0;
  std::string fair_id_;
};

}  // namespace

SessionFactory MakeRouterSessions(gateway::RequestPath path, EppRouterOptions options) {
  auto shared = std::make_shared<Shared>();
  shared->path = path;
  shared->options = options;
  shared->policy = options.policy ? options.policy : std::make_shared<EppPolicy>(options.admission.objective_priority);
  return [shared]() -> std::unique_ptr<PickSession> { return std::make_unique<RouterSession>(shared); };
}

std::expected<std::unique_ptr<k8s::ObjectiveWatcher>, std::string> WatchPoolObjectives(
    const gateway::KubernetesDiscoveryConfig& k, EppPolicy* policy) {
  if (k.pool.empty()) return nullptr;
  k8s::ObjectiveWatcherOptions o;
  o.api.api_url = k.api_url;
  o.api.token_file = k.token_file;
  o.api.ca_file = k.ca_file;
  o.api.namespace_name = k.namespace_name;
  o.api.pool_name = k.pool;
  o.api.on_step = [](const std::string& step, bool failed) {
    spdlog::log(failed ? spdlog::level::warn : spdlog::level::info, "inferenceobjectives: {}", step);
  };
  auto w = k8s::ObjectiveWatcher::Start(std::move(o), policy);
  if (!w) return std::unexpected("epp.watch_objectives: " + w.error());
  return std::move(*w);
}

}  // namespace kvroute::extproc
