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
    // kvroute's default: lowest predicted TTFT subject to an ITL guard, with session
    // hysteresis. predicted_ttft alone minimises this request's TTFT, so once a session's
    // worker queues up it moves the session to a worker holding only the common prefix; the
    // move strands the session's KV and evicts other sessions there, whose next turns miss
    // and move too (a cascade, issues 5/6). prefix_affinity keeps the worker that holds the
    // conversation: threshold 0.90 is above a shared system prompt's share (6,000 of 7,200 =
    // 0.83 in the shared-prefix workload, 20k of >= 32k in Infera's agentic shape) and below a
    // follow-up turn's (1 - new/prompt = 0.94 at 2,048 new of 32k, rising with the context),
    // so it only marks "holds this conversation". The bound, 5 s of the holder's prefill
    // rate (~80-100k tokens on the default profile), is about what a move costs at the
    // issue's p50 context: re-prefill of the ~55k session tokens (~3 s) plus the share of
    // another session it evicts; llm-d's 14 s favours hit rate over TTFT more than a
    // latency-first default should. itl_guard runs first so stickiness never overrides the SLO
    // by much: it keeps the conversation's holder (the same 0.90) up to 1.25x the SLO, because
    // moving the session costs more than a somewhat slower ITL. predicted_ttft counts the
    // decode batch each prefill chunk step carries and the wait for KV blocks when the request
    // would not fit (latency_model.h): without them a worker busy decoding, or with its KV
    // full, looked idle and took the next long prefill (Mooncake trace: SLO attainment 0.33
    // vs llmd_sticky 0.50; shared prefix: TTFT p99 16-33 s from preemption). decode_slowdown
    // adds what TTFT does not show: the decode time a placement costs this request and the
    // worker's running requests (its decode joining their batch, its prefill chunks stalling
    // them), so a request does not join a busy worker when an idle one's extra prefill costs
    // less, and a miss on a busy worker costs what it stalls (simulate, session 5: shared
    // prefix at 16 req/s TTFT p99 20 -> 0.8 s, Mooncake trace SLO attainment 0.49 -> 0.57).
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
  - {name: prefix_affinity, threshold: 0.90, max_ttft_penalty_s: 5.0, if_all_dropped: keep_all}
scorers:
  - {name: predicted_ttft, decode_load: 1.0, kv_wait: 1.0, chunk_tokens: 8192}
  - {name: decode_slowdown, others_share: 0.5, stall: 1.0}
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
