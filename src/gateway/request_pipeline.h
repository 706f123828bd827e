// RequestPipeline: the scheduling path of one request, without any I/O.
//
//   Prepare  body → parse + validate (api/) → model known? (404) → tokenize (precise) or
//            render text (approximate) → context-length check (400) → block keys
//   Route    index lookup + predict-on-route overlay → cache views → worker snapshots
//            (fleet::RouterState) → sched::Policy::Decide → the chosen worker, or a
//            failure-mode fallback, or an error (503) — with the decision and its reasons
//   OnRouted records the prefix as predicted on the chosen worker (kv::PredictedBlocks)
//
// Client errors (bad JSON, wrong types, unknown model, too long) are ApiErrors from Prepare:
// they never reach a worker. Scheduling-path failures (tokenizer error, a policy that reports
// an error such as a missing rate, the debug fault) are not client errors: Route applies
// failure_mode — fail_open picks the least-loaded routable worker serving the model (load
// alone), fail_close answers 503.
//
// Block keys carry the request's extra keys by the one rule (kv/keys/extra_keys.h), exactly as the
// engine hashes them: the LoRA adapter (a request whose model is an adapter in the workers'
// /v1/models), the cache_salt (the tenant's, combined with the client's: gateway/tenancy.h;
// the forwarded body then carries that salt), and each image of a chat request (its
// identifier on the blocks its placeholder tokens overlap; the forwarded part gets it as its
// `uuid`, so the engine names the image alike).
//
// Modes:
//   precise      exact token ids (tokenizer), keys with kv::BlockKeyer over full token
//                blocks, looked up in the event index max-merged with short-lived predictions.
//   approximate  no tokenizer: the prompt text (chat rendered as ChatML) is cut into blocks of
//                block_size × 4 bytes, each keyed by the same keyer over its bytes read as
//                block_size little-endian u32 words; only kvroute's own routing history
//                (PredictedBlocks, long TTL) says who holds what. Prompt tokens are
//                estimated as bytes / 4, so no context check is done (the worker does it).
//
// Ownership: borrows everything in PipelineDeps (they outlive it).
// Thread safety: Prepare/Route/OnRouted are const or touch only thread-safe dependencies; call
// them from any thread. The caller passes its own sched::PolicyState (one per thread).
#pragma once

#include <array>
#include <boost/json/object.hpp>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/generation_params.h"
#include "common/types.h"
#include "fleet/load_tracker.h"
#include "gateway/config.h"
#include "gateway/tenancy.h"
#include "kv/index/approx_predicted.h"
#include "kv/keys/block_key.h"
#include "kv/index/index.h"
#include "sched/decision.h"
#include "sched/pd_decision.h"
#include "sched/plugin.h"
#include "sched/policy.h"
#include "tokenize/image_tokens.h"
#include "tokenize/tokenizer.h"

namespace kvroute::fleet {
class RouterState;
}

namespace kvroute::gateway {


struct PipelineDeps {
  fleet::RouterState* router_state = nullptr;
  const kv::KvIndex* index = nullptr;        // precise mode: the event index
  kv::PredictedBlocks* predicted = nullptr;  // own routing history (both modes)
  tokenize::TokenizerPtr tokenizer;          // precise mode: exact token ids
  std::shared_ptr<const sched::Policy> policy;
  // The model's context length, when a worker told us (/v1/models max_model_len).
  std::function<std::optional<std::int64_t>(std::string_view model)> max_model_len;
  // True when `model` is a LoRA adapter (a /v1/models card with a parent); null: never.
  std::function<bool(std::string_view model)> is_lora_adapter;
  // Called (before forwarding) for every request routed with a cache_salt: the index then
  // treats the worker's runs without extra keys as possibly salted (KvIndex::MarkSaltedTraffic).
  std::function<void(WorkerId)> on_salted_route;
  // Called after a routed prefix was recorded as predicted on a worker (null: nothing): the
  // replica delta stream tells the siblings (gateway/replica_delta_publisher.h).
  std::function<void(WorkerId, std::span<const kv::BlockKey>)> on_predicted;
};

struct PipelineOptions {
  RoutingMode mode = RoutingMode::kPrecise;
  FailureMode failure_mode = FailureMode::kFailOpen;
  // Approximate mode's keyer (precise mode uses the index's, so keys match the events).
  std::uint32_t block_size = kv::kDefaultBlockSize;
  bool inject_schedule_error = false;  // debug.fault: schedule_error
  // scheduler.itl_slo_s: every request's ITL SLO for the policy (RequestProfile::itl_slo_s);
  // 0: none, the policy's own applies.
  double itl_slo_s = 0;
  TenancyConfig tenancy;  // tenancy: the salts kvroute adds per tenant
  // images: accepted in chat requests (else a 400), counted and placed by `image_tokens`,
  // named in the forwarded body by their identifiers (set_image_uuid).
  bool accept_images = true;
  tokenize::ImageTokenOptions image_tokens;
  bool set_image_uuid = true;
  // pd (gateway/pd_config.h): whether RouteTwoLegs places requests by sched::DecidePd, and
  // with which options.
  enum class PdMode { kAuto, kOn, kOff } pd_mode = PdMode::kAuto;
  sched::PdOptions pd;
};

// What the HTTP layer knows about a request beyond its body.
struct RequestContext {
  std::string tenant_salt;  // the tenant's cache_salt (TenantSalts::SaltFor); empty: none
  // The model to route, score and forward the request as, given the body's (the Endpoint
  // Picker's x-gateway-model-name-rewrite, an InferenceModelRewrite rule); null, "" or the
  // same name: the body's. Applied right after parsing, before the model check, so an
  // unknown target is a 404 and the forwarded body's "model" is the target.
  std::function<std::string(std::string_view model)> rewrite_model;
};

// Decode length assumed for the ITL guard and KV accounting when max_tokens is absent: vLLM's
// completions default; chat requests without max_tokens get the same assumption (documented
// in docs/configuration.md; the engine's own default is "the rest of the context").
inline constexpr std::int64_t kAssumedOutputTokens = 16;

// Which API the client spoke: kvroute answers (and reports errors) in that API's shape.
enum class ApiSurface {
  kOpenAi,     // /v1/completions, /v1/chat/completions: bodies relayed unchanged
  kAnthropic,  // /v1/messages: forwarded as OpenAI chat, answers translated back
};

struct PreparedRequest {
  ApiSurface surface = ApiSurface::kOpenAi;
  api::Endpoint endpoint = api::Endpoint::kCompletions;  // what the worker is sent
  std::string model;
  std::string requested_model;  // the body's model when RequestContext::rewrite_model changed it
  bool stream = false;
  // Bytes forwarded to the worker (the client's, unchanged; Anthropic: the equivalent OpenAI
  // chat body, api::OpenAiChatBody); never null once prepared. Shared, not copied: every
  // attempt's upstream request points at these bytes (client::ClientRequest::shared_body).
  std::shared_ptr<const std::string> body;
  std::int64_t prompt_tokens = 0;  // exact (precise) or bytes / 4 (approximate)
  std::int64_t output_tokens = 0;  // max_tokens or kAssumedOutputTokens
  std::vector<kv::BlockKey> keys;  // full blocks of the prompt
  std::uint32_t block_size = kv::kDefaultBlockSize;
  std::string lora_name;           // the adapter, when the model is one (enters every block's keys)
  std::string cache_salt;          // the salt the engine gets (enters block 0's keys); empty: none
  std::vector<kv::MmItem> images;  // each image's identifier and placeholder tokens (precise)
  // Set when tokenizing/rendering failed for a reason that is not the client's fault: Route
  // then applies failure_mode.
  std::optional<std::string> schedule_error;
};

// The prefill leg of a request split by the P/D decision (RouteTwoLegs): RouteOutcome's
// worker decodes, this worker prefills. Everything the lane needs is made on the compute
// thread with the decision.
struct PrefillLeg {
  WorkerId worker = 0;
  std::string worker_name;
  std::string base_url;
  fleet::RoutedRequest booking;  // the prefill leg's, on `worker`
  // The decode worker's booking if it prefills the request itself (the prefill leg failed:
  // llm-d's fallback), replacing the decode leg's.
  fleet::RoutedRequest local_booking;
  std::uint32_t cached_blocks = 0;    // P's GPU prefix
  std::uint32_t transfer_blocks = 0;  // blocks the decode worker is predicted to pull
  double predicted_transfer_s = 0;
  std::shared_ptr<const boost::json::object> client_body;  // the forwarded body, parsed
  std::shared_ptr<const std::string> prefill_body;         // api::MakePrefillBody, serialized
};

struct RouteOutcome {
  WorkerId worker = 0;
  std::string worker_name;
  std::string base_url;
  sched::Decision decision;  // the policy's (empty candidates when the fallback chose)
  bool fell_back = false;    // fail_open chose by load alone
  std::string fallback_reason;
  std::array<std::uint32_t, kNumTiers> cached_blocks{};  // chosen worker's depths per tier
  std::uint32_t cached_any_blocks = 0;
  // What the exchange books on the worker (fleet::BookingFor): uncached tokens, KV blocks,
  // the prediction and the wait correction it was made with.
  fleet::RoutedRequest booking;
  bool pd_placed = false;              // decided by sched::DecidePd (RouteTwoLegs)
  std::optional<PrefillLeg> prefill;   // set when split: `worker` takes the decode leg
  // The P/D decision itself when pd_placed (every option priced, the rule's numbers), shared
  // so that copies of the outcome (retries, ext_proc's fallbacks) do not copy its options.
  std::shared_ptr<const sched::PdDecision> pd;
};

// The request as the policy sees it (cache views added by the router when the policy reads
// them).
sched::RequestProfile ProfileOf(const PreparedRequest& request);

class RequestPipeline {
 public:
  RequestPipeline(PipelineDeps deps, PipelineOptions options);

  std::expected<PreparedRequest, api::ApiError> Prepare(api::Endpoint endpoint,
                                                        std::string_view body, Nanos now,
                                                        const RequestContext& context = {}) const;
  // The same, taking the body over (no copy of a possibly multi-MiB prompt): the proxy's.
  std::expected<PreparedRequest, api::ApiError> PrepareOwned(
      api::Endpoint endpoint, std::string&& body, Nanos now,
      const RequestContext& context = {}) const;

  // An Anthropic Messages body: parsed and validated (api/anthropic_messages.h), converted to
  // the OpenAI chat body that will be forwarded, and prepared exactly as that chat request
  // (so the tokens kvroute keys are those the worker will render).
  std::expected<PreparedRequest, api::ApiError> PrepareMessages(
      std::string_view body, Nanos now, const RequestContext& context = {}) const;

  // The tenant salt of a request by its headers (options().tenancy).
  std::string TenantSalt(const net::HttpRequest& request) const {
    return tenants_.SaltFor(request);
  }

  // Chooses a worker not in `exclude` (workers already tried for this request).
  // Errors: 503 when no worker can take it (all unhealthy/draining/excluded, or fail_close).
  std::expected<RouteOutcome, api::ApiError> Route(const PreparedRequest& request,
                                                   std::span<const WorkerId> exclude, Nanos now,
                                                   sched::PolicyState& state) const;

  // Route, or, while P/D is active (options().pd_mode: on, or auto with a worker whose role
  // is prefill or decode), the placement by sched::DecidePd over the same snapshot: aggregated
  // on one worker, or split (RouteOutcome::prefill). The proxy's; ext_proc keeps Route (one
  // endpoint per request). Errors and failure_mode as Route (fail_open never picks a
  // prefill-only worker). In gateway/pd_route.cc.
  std::expected<RouteOutcome, api::ApiError> RouteTwoLegs(const PreparedRequest& request,
                                                          std::span<const WorkerId> exclude,
                                                          Nanos now,
                                                          sched::PolicyState& state) const;
  bool PdActive() const;

  // The request was sent to `outcome.worker`: its prefix is predicted there from now on.
  void OnRouted(const PreparedRequest& request, const RouteOutcome& outcome, Nanos now) const {
    OnRoutedTo(request, outcome.worker, now);
  }
  void OnRoutedTo(const PreparedRequest& request, WorkerId worker, Nanos now) const;

  // Every worker's cached prefix of the request, as Route sees it (/debug/route).
  std::vector<sched::CacheView> CacheViewsOf(const PreparedRequest& request, Nanos now) const {
    return CacheViews(request.keys, now);
  }

  const PipelineOptions& options() const { return options_; }
  std::uint32_t block_size() const;

 private:
  std::vector<kv::BlockKey> KeysOfText(std::string_view text) const;
  std::vector<sched::CacheView> CacheViews(std::span<const kv::BlockKey> keys, Nanos now) const;
  std::expected<RouteOutcome, api::ApiError> Fallback(const PreparedRequest& request,
                                                      std::vector<sched::WorkerSnapshot> workers,
                                                      std::string reason) const;

  PipelineDeps deps_;
  PipelineOptions options_;
  kv::BlockKeyer approx_keyer_;
  TenantSalts tenants_;
};

// The decision and the request's shape as JSON text (/debug/route, logs). `views`, when
// given, adds each candidate's cached prefix ("cached_any_blocks" per candidate). An outcome
// placed by the P/D decision adds "pd" (gateway/pd_debug.h), its workers named by `name_of`
// (absent: by id).
std::string DecisionJson(const PreparedRequest& request, const RouteOutcome* outcome,
                         const sched::Decision& decision, std::string_view error,
                         std::span<const sched::CacheView> views = {},
                         const std::function<std::string(WorkerId)>& name_of = {});

}  // namespace kvroute::gateway
