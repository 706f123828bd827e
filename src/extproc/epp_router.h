// EppRouter: the picker of `kvroute serve --epp` — each ext_proc stream decides and books
// exactly as the HTTP gateway does, through the gateway's own request path
// (gateway::RequestPath: RequestPipeline::Prepare/Route, gateway::BookRoute,
// gateway::ResponseTokens, fleet::RouterState), so a request routed through Envoy is accounted
// for like one kvroute proxied itself.
//
//   Pick            :path → endpoint (/v1/chat/completions, /v1/completions); the body is
//                   prepared (parsed, validated, tokenized, keyed) like the HTTP path's; a
//                   client error is an ImmediateResponse with its status and OpenAI error body.
//                   With x-gateway-model-name-rewrite the request is prepared, routed and
//                   booked as that model, and the body handed back carries it.
//                   Route over the router state's snapshot, restricted to the subset hint
//                   (workers outside it are excluded; none left: 503), booked at once. The
//                   fallbacks are the policy's next choices (Route again excluding the ones
//                   before), unbooked. Other paths (GET /v1/models, say): the routable workers,
//                   fewest in flight first, nothing booked.
//   shedding        a sheddable request (its x-gateway-inference-objective's priority < 0,
//                   epp_admission.h) when every candidate — each routable worker inside the
//                   subset hint — is saturated: ImmediateResponse 429, OpenAI error body,
//                   nothing booked. Checked after the body is prepared (a client error is
//                   still its own 4xx).
//   fairness        in a saturated pool, a request whose x-gateway-inference-fairness-id holds
//                   more than its fair share of its priority's requests in flight (epp_fairness.h)
//                   is answered 429 (code fairness_share_exceeded), nothing booked; every
//                   request routed is counted until its stream ends.
//   response        served endpoint ≠ the pick (the gateway used a fallback): the booking
//                   moves to the served worker. SSE chunks → first token / tokens
//                   (ResponseTokens); a buffered 200's first bytes → first token; the worker's
//                   status → its health like the HTTP path's (500 counts against it).
//   end             response complete → OnDone(ok = status 200 and no error event); the
//                   destination never reached the gateway → Cancel; cut mid-way → OnDone(false).
//
// Endpoints are the workers' base URLs as host:port (Envoy's ORIGINAL_DST needs ip:port, so
// workers must be configured by IP). Request ids carry the top bit, so they never meet the
// HTTP proxy's (which count up from 1) in the shared router state.
//
// Thread safety: the factory and its sessions may run on any gRPC thread; each session is one
// stream's. Each thread decides with its own sched::PolicyState (thread_local).
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <string>

#include "extproc/epp_admission.h"
#include "extproc/epp_policy.h"
#include "extproc/epp_stream.h"
#include "gateway/gateway.h"
#include "k8s/objective_watcher.h"

namespace kvroute::extproc {

struct EppRouterOptions {
  // Fallbacks after the pick in x-gateway-destination-endpoint (the proxy walks them on retry).
  int max_fallbacks = 2;
  std::uint64_t seed = 0;  // of each thread's PolicyState
  // Objective → priority and the saturation thresholds (epp_admission.h).
  EppAdmissionOptions admission;
  // Objectives and model rewrites merged with the cluster's (epp_policy.h; shared with the
  // watcher that fills it); null: one holding admission.objective_priority alone.
  std::shared_ptr<EppPolicy> policy;
};

// One RouterSession per stream, deciding over `path` (borrowed; must outlive the server).
SessionFactory MakeRouterSessions(gateway::RequestPath path, EppRouterOptions options = {});

// The InferencePool of discovery.kubernetes (`k.pool`; none: nullptr) — its InferenceObjective and
// InferenceModelRewrite objects followed into `policy` (borrowed; must outlive the watcher), with
// the same API address, credentials and namespace as the pool's discovery; steps logged.
std::expected<std::unique_ptr<k8s::ObjectiveWatcher>, std::string> WatchPoolObjectives(
    const gateway::KubernetesDiscoveryConfig& k, EppPolicy* policy);

}  // namespace kvroute::extproc
