#include "gateway/admin.h"

#include <boost/json.hpp>
#include <mutex>
#include <set>

#include "api/api_error.h"
#include "api/responses.h"
#include "api/tokenize_api.h"
#include "gateway/anthropic_bridge.h"
#include "gateway/model_catalog.h"
#include "gateway/proxy/proxy.h"
#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "fleet/router_state.h"
#include "gateway/replica_delta_publisher.h"
#include "gateway/replica_snapshot.h"
#include "kv/index/index.h"
#include "sched/tier_pricing.h"
#include "sched/plugin.h"
#include "telemetry/prometheus_text.h"

namespace kvroute::gateway {
namespace {

using net::HandlerResult;
using net::HttpRequest;
using net::HttpResponse;
using Ctx = std::shared_ptr<const EndpointContext>;

HttpResponse Error(const api::ApiError& e) { return net::JsonResponse(e.status, e.Body()); }

HttpResponse Json(int status, const boost::json::value& v) {
  return net::JsonResponse(status, boost::json::serialize(v));
}

std::set<WorkerId> RoutableWorkers(const EndpointContext& c) {
  std::set<WorkerId> out;
  const Nanos now = c.clock->Now();
  for (const auto& w : c.router_state->List()) {
    if (c.router_state->health().Routable(w.id, now)) out.insert(w.id);
  }
  return out;
}

bool Ready(const EndpointContext& c) { return !c.draining->load() && !RoutableWorkers(c).empty(); }

// Wraps a handler: API key, then the body limit with an OpenAI-style 413 (the server itself
// refuses far larger bodies with a plain 413 before reading them). The Messages API route
// (`anthropic`) also takes Anthropic's "x-api-key: <key>" and answers in Anthropic's shape.
net::Handler Guarded(Ctx c, bool needs_key, net::Handler inner, bool anthropic = false) {
  return [c, needs_key, anthropic, inner = std::move(inner)](HttpRequest&& r) -> HandlerResult {
    auto error = [anthropic](const api::ApiError& e) {
      return anthropic ? net::JsonResponse(e.status, AnthropicErrorBody(e)) : Error(e);
    };
    if (needs_key && !Authorized(r.Header("authorization"), c->config->api_keys) &&
        !(anthropic && AuthorizedApiKey(r.Header("x-api-key"), c->config->api_keys))) {
      c->metrics->OnError("unauthorized");
      return error(api::ApiError::InvalidApiKey());
    }
    if (static_cast<std::int64_t>(r.body.size()) > c->config->limits.max_body_bytes) {
      c->metrics->OnError("body_too_large");
      return error(
          api::ApiError::BodyTooLarge(static_cast<std::size_t>(c->config->limits.max_body_bytes)));
    }
    return inner(std::move(r));  // the request (and its body) moves on, never copied
  };
}

HandlerResult Models(const EndpointContext& c) {
  return Json(200, api::ModelsListJson(c.catalog->Cards(RoutableWorkers(c))));
}

HandlerResult Tokenize(const EndpointContext& c, const HttpRequest& r) {
  auto req = api::ParseTokenizeRequest(r.body);
  if (!req) return Error(req.error());
  if (!c.tokenizer) return Error(api::ApiError::NotFound("/tokenize"));
  std::vector<TokenId> ids;
  if (req->IsChat()) {
    auto enc = c.tokenizer->EncodeChat(std::get<tokenize::ChatRequest>(req->input));
    if (!enc) return Error(api::ApiError::InvalidRequest(enc.error(), "messages"));
    ids = std::move(*enc);
  } else {
    ids = c.tokenizer->Encode(std::get<std::string>(req->input), req->add_special_tokens);
  }
  std::int64_t max_len = 0;
  if (req->model) max_len = c.catalog->MaxModelLen(*req->model).value_or(0);
  return Json(200, api::TokenizeResponseJson(ids, max_len, std::nullopt));
}

HandlerResult Detokenize(const EndpointContext& c, const HttpRequest& r) {
  auto req = api::ParseDetokenizeRequest(r.body);
  if (!req) return Error(req.error());
  if (!c.tokenizer) return Error(api::ApiError::NotFound("/detokenize"));
  auto text = c.tokenizer->Decode(req->tokens);
  if (!text) return Error(api::ApiError::InvalidRequest(text.error(), "tokens"));
  return Json(200, api::DetokenizeResponseJson(*text));
}

HandlerResult DebugRoute(const EndpointContext& c, const HttpRequest& r) {
  static std::mutex mu;
  static sched::PolicyState state(c.config->scheduler_seed ^ 0xdeb6u);
  // The body's shape says which endpoint it is for: chat bodies have "messages".
  const bool chat = r.body.find("\"messages\"") != std::string::npos;
  const Nanos now = c.clock->Now();
  // The tenant's salt applies here too: a tenant sees only what it would be routed by.
  auto prepared =
      c.pipeline->Prepare(chat ? api::Endpoint::kChatCompletions : api::Endpoint::kCompletions,
                          r.body, now, RequestContext{.tenant_salt = c.pipeline->TenantSalt(r)});
  if (!prepared) return Error(prepared.error());
  std::lock_guard lock(mu);
  // The proxy's placement: the P/D decision while P/D is active, else the policy's (Route).
  auto outcome = c.pipeline->RouteTwoLegs(*prepared, {}, now, state);
  if (!outcome) {
    return net::JsonResponse(
        200, DecisionJson(*prepared, nullptr, sched::Decision{}, outcome.error().message));
  }
  const auto views = c.pipeline->CacheViewsOf(*prepared, now);
  auto name_of = [&c](WorkerId id) {
    std::string name;
    c.router_state->VisitSpec(id, [&name](const fleet::WorkerSpec& spec) { name = spec.name; });
    return name;
  };
  return net::JsonResponse(
      200, DecisionJson(*prepared, &*outcome, outcome->decision, {}, views, name_of));
}

// The worker table first, then the image: a worker that joins in between is only missing
// from the sibling's warm start (its events fill it), never credited under a wrong name.
HandlerResult IndexSnapshot(const EndpointContext& c) {
  if (c.index == nullptr) return Error(api::ApiError::NotFound("/admin/index/snapshot"));
  std::vector<SnapshotWorker> workers;
  for (const auto& w : c.router_state->List()) workers.push_back({w.id, w.spec.name});
  workers.push_back({sched::kSharedStoreWorker, std::string(kSharedStoreSnapshotName)});
  HttpResponse r;
  r.content_type = "application/octet-stream";
  r.body = EncodeSiblingSnapshot(workers, c.index->Dump());
  return r;
}

// A sibling's subscription: a body that lasts as long as both replicas (docs/replicas.md).
HandlerResult ReplicaDeltas(const EndpointContext& c) {
  if (c.deltas == nullptr) return Error(api::ApiError::NotFound("/admin/replica/deltas"));
  HttpResponse r;
  r.content_type = "application/x-kvroute-deltas";
  r.stream = c.deltas->Subscribe();
  return r;
}

HandlerResult Workers(const EndpointContext& c) {
  const Nanos now = c.clock->Now();
  boost::json::array list;
  for (const auto& w : c.router_state->List()) {
    boost::json::object o;
    o["name"] = w.spec.name;
    o["url"] = w.spec.base_url;
    boost::json::array models;
    for (const auto& m : w.spec.models) models.push_back(boost::json::string(m));
    o["models"] = std::move(models);
    // P/D: what the worker was given (static keys, its etcd record or pod annotations), with
    // the profile's defaults resolved by the router state.
    o["role"] = sched::RoleName(w.spec.role);
    o["tp"] = w.spec.tp;
    o["gpus"] = w.spec.gpus;
    if (auto link = c.router_state->Link(w.id); link && link->seed_lane_bytes_per_s() > 0) {
      boost::json::object l;
      l["name"] = w.spec.link;
      l["seed_lane_bytes_per_s"] = link->seed_lane_bytes_per_s();  // profile_speedup applied
      l["lane_bytes_per_s"] = link->lane_bytes_per_s().value_or(link->seed_lane_bytes_per_s());
      l["latency_s"] = link->latency_s();
      l["samples"] = link->samples();
      o["kv_link"] = std::move(l);
    }
    fleet::HealthStatus h = c.router_state->health().Status(w.id, now);
    o["health"] = fleet::HealthStateName(h.state);
    o["draining"] = h.draining;
    o["routable"] = h.Routable();
    o["consecutive_failures"] = h.consecutive_failures;
    fleet::WorkerLoad load = c.router_state->load().Load(w.id);
    o["inflight_requests"] = load.inflight_requests;
    o["pending_prefill_tokens"] = load.pending_prefill_tokens;
    o["active_kv_blocks"] = load.active_kv_blocks;
    if (auto m = c.router_state->Metrics(w.id)) {
      boost::json::object s;
      s["age_s"] = m->AgeSeconds(now);
      if (m->num_waiting) s["num_waiting"] = *m->num_waiting;
      if (m->num_running) s["num_running"] = *m->num_running;
      if (m->kv_usage) s["kv_usage"] = *m->kv_usage;
      if (m->block_size) s["block_size"] = *m->block_size;
      if (m->num_gpu_blocks) s["num_gpu_blocks"] = *m->num_gpu_blocks;
      o["scraped"] = std::move(s);
    }
    if (auto e = c.router_state->rates().Estimate(w.id)) {
      boost::json::object rates;
      rates["prefill_tokens_per_s"] = e->prefill_tokens_per_s;
      rates["decode_base_s"] = e->decode.base_s;
      rates["decode_per_sequence_s"] = e->decode.per_sequence_s;
      rates["decode_per_kv_token_s"] = e->decode.per_kv_token_s;
      rates["prefill_samples"] = e->prefill_samples;
      rates["decode_samples"] = e->decode_samples;
      o["rates"] = std::move(rates);
    }
    list.push_back(std::move(o));
  }
  return Json(200, boost::json::object{{"workers", std::move(list)}});
}

HandlerResult SetDrain(const EndpointContext& c, const HttpRequest& r, bool drain) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(r.body, ec);
  const boost::json::value* name = nullptr;
  if (!ec && v.is_object()) name = v.as_object().if_contains("worker");
  if (name == nullptr || !name->is_string()) {
    return Error(api::ApiError::InvalidRequest("body must be {\"worker\": \"<name>\"}", "worker"));
  }
  auto id = c.router_state->FindByName(std::string_view(name->as_string()));
  if (!id) {
    api::ApiError e = api::ApiError::InvalidRequest("unknown worker", "worker");
    e.status = 404;
    return Error(e);
  }
  c.router_state->health().SetDraining(*id, drain);
  return Json(200, boost::json::object{{"worker", name->as_string()}, {"draining", drain}});
}

}  // namespace

bool Authorized(std::string_view header, const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (!header.starts_with(kBearer)) return false;
  return AuthorizedApiKey(header.substr(kBearer.size()), keys);
}

bool AuthorizedApiKey(std::string_view token, const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  for (const auto& k : keys) {
    // Compare every byte regardless of where a mismatch is, so timing says nothing about keys.
    if (k.size() != token.size()) continue;
    unsigned char diff = 0;
    for (std::size_t i = 0; i < k.size(); ++i) {
      diff |= static_cast<unsigned char>(k[i] ^ token[i]);
    }
    if (diff == 0) return true;
  }
  return false;
}

void RegisterEndpoints(net::HttpServer& server, Ctx c) {
  server.Handle("POST", "/v1/completions", Guarded(c, true, [c](HttpRequest&& r) {
                  return c->proxy->Handle(api::Endpoint::kCompletions, std::move(r));
                }));
  server.Handle("POST", "/v1/chat/completions", Guarded(c, true, [c](HttpRequest&& r) {
                  return c->proxy->Handle(api::Endpoint::kChatCompletions, std::move(r));
                }));
  server.Handle(
      "POST", "/v1/messages",
      Guarded(
          c, true, [c](HttpRequest&& r) { return c->proxy->HandleMessages(std::move(r)); },
          /*anthropic=*/true));
  server.Handle("GET", "/v1/models",
                Guarded(c, true, [c](const HttpRequest&) { return Models(*c); }));
  server.Handle("POST", "/tokenize",
                Guarded(c, true, [c](const HttpRequest& r) { return Tokenize(*c, r); }));
  server.Handle("POST", "/detokenize",
                Guarded(c, true, [c](const HttpRequest& r) { return Detokenize(*c, r); }));
  server.Handle("POST", "/debug/route",
                Guarded(c, true, [c](const HttpRequest& r) { return DebugRoute(*c, r); }));
  server.Handle("GET", "/admin/workers",
                Guarded(c, true, [c](const HttpRequest&) { return Workers(*c); }));
  server.Handle("POST", "/admin/drain",
                Guarded(c, true, [c](const HttpRequest& r) { return SetDrain(*c, r, true); }));
  server.Handle("POST", "/admin/undrain",
                Guarded(c, true, [c](const HttpRequest& r) { return SetDrain(*c, r, false); }));
  server.Handle("GET", "/admin/index/snapshot",
                Guarded(c, true, [c](const HttpRequest&) { return IndexSnapshot(*c); }));
  server.Handle("GET", "/admin/replica/deltas",
                Guarded(c, true, [c](const HttpRequest&) { return ReplicaDeltas(*c); }));
  server.Handle("GET", "/health", [](const HttpRequest&) -> HandlerResult {
    return net::JsonResponse(200, R"({"status":"ok"})");
  });
  server.Handle("GET", "/ready", [c](const HttpRequest&) -> HandlerResult {
    if (Ready(*c)) return net::JsonResponse(200, R"({"ready":true})");
    const char* why = c->draining->load() ? "draining" : "no routable worker";
    return Json(503, boost::json::object{{"ready", false}, {"reason", why}});
  });
  server.Handle("GET", "/metrics", [c](const HttpRequest&) -> HandlerResult {
    c->metrics->SetReady(Ready(*c));
    if (c->refresh_metrics) c->refresh_metrics();
    return net::TextResponse(200, c->metrics->Expose(), telemetry::kPrometheusContentType);
  });
}

}  // namespace kvroute::gateway
