// Built-in policies, written in the same YAML users write, so presets and user policies go
// through one parser. Numbers here are the published defaults of the router each preset
// reproduces (router-anchors.md), or operator targets (SLOs) — never calibrated rates.
#include <array>
#include <utility>

#include "sched/registry.h"

namespace kvroute::sched {
namespace {

constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kPresets = {{
    {"round_robin", R"(
name: round_robin
filters: [{name: healthy}, {name: not_draining}, {name: model}]
picker: {name: round_robin}
)"},
    {"random", R"(
name: random
filters: [{name: healthy}, {name: not_draining}, {name: model}]
picker: {name: random}
)"},
    {"least_load", R"(
name: least_load
filters: [{name: healthy}, {name: not_draining}, {name: model}]
scorers: [{name: inflight_requests}]
picker: {name: argmin}
)"},
    // llm-d's earlier approximate-prefix blend (prefix 3 + queue 2 + kv-util 2) over the
    // prefix depths the caller took from kvroute's predicted-blocks index.
    {"approx_prefix", R"(
name: approx_prefix
filters: [{name: healthy}, {name: not_draining}, {name: model}]
scorers:
  - {name: prefix_miss, weight: 3}
  - {name: inflight_normalized, weight: 2}
  - {name: kv_usage, weight: 2}
picker: {name: argmin}
)"},
    // Dynamo's defaults: credit 1 / 0.75 / 0.25 / 0, prefill_load_scale 1, temperature 0.
    {"dynamo_cost", R"(
name: dynamo_cost
filters: [{name: healthy}, {name: not_draining}, {name: model}]
scorers:
  - name: dynamo_cost
    prefill_load_scale: 1.0
    host_weight: 0.75
    disk_weight: 0.25
    shared_weight: 0.0
    active_request_weight: 0.0
picker: {name: softmax, temperature: 0.0}
)"},
    // llm-d "sticky until saturated": affinity filter (>= 0.80, tau = rate x 14 s) +
    // token-load scorer + max-score picker (argmin of cost).
    {"llmd_sticky", R"(
name: llmd_sticky
filters:
  - {name: healthy}
  - {name: not_draining}
  - {name: model}
  - {name: prefix_affinity, threshold: 0.80, max_ttft_penalty_s: 14.0, if_all_dropped: keep_all}
scorers: [{name: token_load, token_limit: 4194304}]
picker: {name: argmin}
)"},
    // kvroute's default: lowest predicted latency (TTFT plus the decode time the placement
    // costs) subject to an ITL guard, with session stickiness bounded by work conservation.
    // predicted_ttft alone minimises this request's TTFT, so once a session's worker queued
    // up it moved the session elsewhere; the move strands its KV and evicts other sessions
    // there, whose next turns miss and move too (a cascade, issues 5/6). prefix_affinity keeps
    // a worker holding >= 20 % of the prompt (a conversation's holder, or a shared prompt's)
    // while its predicted TTFT exceeds no rival's by more than the recompute it saves
    // (tau: derived, filters.h): the bound comes from the learned rates and the measured
    // queueing, not a constant. Rivals are workers with no routed prefill waiting
    // (no_prefill_queue): they may be decoding, since a chunked-prefill engine starts a new
    // prompt at its next step. Idle-only rivals were needed while queued holders were
    // predicted ~4x too slow (booked prefill counted until first token, and the wait
    // correction wound up on own-prefill errors, fleet/load_tracker.h); with calibrated
    // queues the wider rule won every conversation cell (docs/bench/policy-matrix.md).
    // An earlier fixed bound (5 s of prefill) trusted predictions that were 28x too low
    // under load and starved six of eight workers (issue 15).
    // itl_guard runs first so stickiness never overrides the SLO by much: it keeps the
    // conversation's holder (>= 0.90) up to 1.25x the SLO, because moving the session costs
    // more than a somewhat slower ITL. predicted_ttft counts the decode batch each prefill
    // chunk step carries and the wait for KV blocks when the request would not fit
    // (latency_model.h), both multiplied by the worker's measured wait correction.
    // decode_slowdown adds what TTFT does not show: the decode time a placement costs this
    // request and the worker's running requests. Its stall term (prefill chunks slowing the
    // running batch) is off: with calibrated queues it lengthened the TTFT tail on the
    // Mooncake and conversation traces (stall 0.05-0.1: +3-7 %). Threshold 0.20, the
    // no_prefill_queue rivals and stall 0 were chosen on the matrix; held-out workloads
    // (other trace seeds, loads and fleet sizes) check them (docs/bench/policy-matrix.md).
    {"predicted_latency", R"(
name: predicted_latency
filters:
  - {name: healthy}
  - {name: not_draining}
  - {name: model}
  - name: itl_guard
    itl_slo_s: 0.1
    holder_threshold: 0.90
    holder_max_itl_factor: 1.25
    if_all_dropped: keep_all
  - {name: prefix_affinity, threshold: 0.20, tau: derived, rivals: no_prefill_queue, chunk_tokens: 8192, if_all_dropped: keep_all}
scorers:
  - {name: predicted_ttft, decode_load: 1.0, kv_wait: 1.0, tier_queue: 1.0, chunk_tokens: 8192}
  - {name: decode_slowdown, others_share: 0.5, stall: 0}
picker: {name: softmax, temperature: 0.0}
)"},
}};

}  // namespace

std::string_view BuiltinPolicyYaml(std::string_view preset) {
  for (const auto& [name, yaml] : kPresets) {
    if (name == preset) return yaml;
  }
  return {};
}

std::vector<std::string_view> BuiltinPolicyNames() {
  std::vector<std::string_view> out;
  for (const auto& p : kPresets) out.push_back(p.first);
  return out;
}

std::expected<std::shared_ptr<const Policy>, ConfigError> BuiltinPolicy(std::string_view preset) {
  std::string yaml = "preset: ";
  yaml += preset;
  return Registry::Builtin().ParsePolicy(yaml);
}

}  // namespace kvroute::sched
