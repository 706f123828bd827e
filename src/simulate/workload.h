// Workloads of the simulator, in token ids (no text: the router's view of a prompt in
// precise mode is its token ids, and simulation never needs the words). The same shapes as
// `kvroute bench` (bench/workload.h, bench/trace.h), so live and simulated runs compare:
//
//   agentic        closed loop: `concurrency` sessions at a time; turn k's prompt is turn
//                  k-1's prompt + the tokens the engine actually generated + new user tokens;
//                  the next turn arrives when the previous one finishes (+ think time); a
//                  finished session is replaced by a fresh one until `sessions` have run;
//                  optionally with the live client's warm-up step and early stop
//                  (workload::AgenticProcedure).
//   shared-prefix  open loop: Poisson arrivals at `rate`; groups sharing a system prompt.
//   trace          open loop: a Mooncake trace (hash ids expanded with workload::ExpandPrompt),
//                  arrivals divided by `speedup`, optionally `replicas` copies side by side
//                  with disjoint hash ids (a bigger cluster's worth of the same traffic).
//
// Token ids come from a seeded generator over [kFirstToken, kFirstToken + kVocabulary).
// Ownership: a Workload owns its generator state. Thread safety: none.
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "workload/trace.h"
#include "workload/workload.h"
#include "common/types.h"

namespace kvroute::simulate {

inline constexpr TokenId kFirstToken = 100;
inline constexpr TokenId kVocabulary = 30000;

// Seeded token ids: a pure function of (seed, stream, index).
std::vector<TokenId> SeededTokens(std::uint64_t seed, std::uint64_t stream, std::uint32_t count);

struct SimRequest {
  std::vector<TokenId> prompt;
  std::uint32_t max_tokens = 1;  // exact output length (ignore_eos, as kvroute bench sends)
  int session = -1;              // agentic: session; shared-prefix: group; trace: -1
  int turn = -1;                 // agentic: turn; otherwise the request's index
  bool warmup = false;           // agentic: sent in the warm-up step (not measured)
};

struct Arrival {
  Nanos at{0};
  SimRequest request;
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual std::string name() const = 0;
  // The next arrival known without feedback (open loop; the first turns of closed loop),
  // in non-decreasing time; nullopt when there are no more.
  virtual std::optional<Arrival> Next() = 0;
  // A request ended at `now` (`ok` false: it failed; `output` empty then). Closed loop
  // returns the follow-up turn (or a new session's first turn); the end of a warm-up step
  // returns every client's first measured turn at once.
  virtual std::vector<Arrival> OnDone(const SimRequest& done, std::span<const TokenId> output,
                                      bool ok, Nanos now) = 0;
  // Whether the level has stopped sending (AgenticProcedure::early_stop): an arrival that is
  // due after that is never sent.
  virtual bool stopped() const { return false; }
  // Whether OnDone needs the generated tokens (the simulator keeps them only then).
  virtual bool wants_output() const = 0;
};

struct AgenticSimOptions {
  workload::AgenticOptions shape;  // sessions <= 0: as many as the concurrency
  int concurrency = 1;
  Nanos think_time{0};
  // Each follow-up request waits think_time + a seeded uniform draw in [0, turn_jitter)
  // (workload::AgenticTurnPause, the function `kvroute bench` waits too): the client, network
  // and router delays that a live run has and a zero-latency model lacks. Without it,
  // sessions that start together stay in lockstep forever (every turn of every session ends
  // in the same engine step, so their prefills always batch together and never overlap
  // another session's decode), which a live cluster never does.
  Nanos turn_jitter{0};
  workload::AgenticProcedure procedure;  // warm-up step and early stop (workload/workload.h)
};
std::unique_ptr<Workload> NewAgenticWorkload(const AgenticSimOptions& options);

// `kvroute simulate`'s default agentic sessions: the policy matrix's (scripts/policy-matrix:
// a 4,000-token prefix shared by every session, 2,000 more per session, 10 turns of 1,500 new
// tokens in and 200 out), 24 of them (three per slot at the default concurrency of 8). Its longest
// request, 23,000 tokens with its output, fits the default profile's max_model_len (Qwen3-32B,
// 40,960), so `kvroute simulate` with no flags serves every request. workload::AgenticOptions' own
// defaults are Infera's shape (contexts up to ~118k tokens: `kvroute bench` and `kvroute demo` run
// it with max_model_len 131072); pass its sizes as flags, with --max-model-len 131072, to simulate
// that shape.
workload::AgenticOptions DefaultAgenticShape();

// Tokens of the shape's longest request, prompt plus output: its last turn, when every
// earlier turn returned its full output (ignore_eos, as both clients send).
std::uint64_t LongestAgenticRequestTokens(const workload::AgenticOptions& shape);

struct SharedPrefixSimOptions {
  workload::SharedPrefixOptions shape;
  double rate_per_s = 1;
  int requests = 0;  // 0: every prompt once
};
std::unique_ptr<Workload> NewSharedPrefixWorkload(const SharedPrefixSimOptions& options);

struct TraceSimOptions {
  double speedup = 1;
  double prefix_multiplier = 1;
  int replicas = 1;
  std::uint64_t seed = 1;
};
// REQUIRES: trace.hash_block_tokens > 0 or no request has hash ids (Azure: unique prompts).
std::unique_ptr<Workload> NewTraceWorkload(std::shared_ptr<const workload::Trace> trace,
                                           const TraceSimOptions& options);

}  // namespace kvroute::simulate
