// Synthetic workloads of kvroute bench, with their public sources:
//
// Agentic multi-turn sessions (AMD-AGI/Infera examples/kimi_agentic_bench, driving vLLM's
// benchmarks/multi_turn): a prefix shared by every session (20,000 tokens), a per-session
// prefix on the first turn (10,000), then up to 30 user turns of ~2,048 input tokens, each
// answered with ~900 output tokens; closed loop, every turn carries the whole history (the
// client appends the real assistant replies).
//
// Shared-prefix groups (llm-d's benchmark, inference-perf `shared_prefix`): 150 groups × 5
// prompts; each group shares a 6,000-token system prompt, each prompt adds a 1,200-token
// question and asks for 1,000 output tokens; Poisson arrivals over a rate ladder.
//
// Text is made of seeded pseudo-words sized with the target's tokenizer, so the token counts
// hold for whichever tokenizer the workers use.
//
// Thread safety: generators are pure functions of their options and seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/types.h"
#include "tokenize/tokenizer.h"

namespace kvroute::workload {

// Seeded text of about `tokens` tokens under `tokenizer` (within a few tokens, never fewer).
std::string MakeText(const tokenize::Tokenizer& tokenizer, std::uint32_t tokens,
                     std::uint64_t seed);

struct AgenticOptions {
  int sessions = 8;
  std::uint32_t common_prefix_tokens = 20000;
  std::uint32_t session_prefix_tokens = 10000;
  int turns = 30;
  std::uint32_t turn_input_tokens = 2048;
  std::uint32_t output_tokens = 900;
  std::uint64_t seed = 1;
};

// How a closed-loop level is measured. vLLM's multi-turn benchmark tool
// (benchmarks/multi_turn/benchmark_serving_multi_turn.py), which Infera's run_sweep.sh drives
// with --warmup-step and its default early stop, does both; kvroute's own default is neither
// (every turn of every session counts, the level ends with its last session).
struct AgenticProcedure {
  // The first turn of every session is sent first, `concurrency` at a time, and is not
  // measured; once all of them are done the measured pass starts every client on its
  // session's second turn (the tool's skip_first_turn).
  bool warmup_step = false;
  // The level ends when the first client runs out of sessions (its last session done and
  // none left to take): no request is sent after that, the ones in flight finish and count.
  bool early_stop = false;
  bool any() const { return warmup_step || early_stop; }
};

struct AgenticSession {
  std::string system_prompt;            // the common prefix, identical in every session
  std::vector<std::string> user_turns;  // turn 0 starts with the session prefix
  std::uint32_t output_tokens = 0;      // max_tokens of every turn (with ignore_eos)
};

std::vector<AgenticSession> MakeAgenticSessions(const tokenize::Tokenizer& tokenizer,
                                                const AgenticOptions& options);

// The pause of a closed-loop agentic client between requests, in MODEL time: after turn
// `turn` of session `session` ends, the client waits think_time + a seeded uniform draw in
// [0, turn_jitter) before it sends its next request (that session's next turn, or the first
// turn of the next session it takes). The one definition behind `kvroute bench` (runner.cc
// waits it in wall time, divided by --speedup) and `kvroute simulate` (simulate/workload.cc
// schedules it in virtual time), so the same seed, session and turn give the same pause on
// both sides. The jitter breaks the lockstep of sessions whose turns end in the same engine
// step (docs/simulation.md "Fidelity"). Zero for both: no pause (the default).
struct TurnPause {
  Nanos think_time{0};
  Nanos turn_jitter{0};
  bool enabled() const { return think_time.count() > 0 || turn_jitter.count() > 0; }
};
// `seed` is the level's workload seed (AgenticOptions::seed of the sessions being run).
Nanos AgenticTurnPause(const TurnPause& pause, std::uint64_t seed, int session, int turn);

struct SharedPrefixOptions {
  int groups = 150;
  int prompts_per_group = 5;
  std::uint32_t system_prompt_tokens = 6000;
  std::uint32_t question_tokens = 1200;
  std::uint32_t output_tokens = 1000;
  std::uint64_t seed = 1;
};

struct SharedPrefixPrompt {
  int group = 0;
  std::string system_prompt;
  std::string question;
  std::uint32_t output_tokens = 0;
};

// All prompts in a seeded random order (groups interleaved, as the benchmark sends them).
std::vector<SharedPrefixPrompt> MakeSharedPrefixPrompts(const tokenize::Tokenizer& tokenizer,
                                                        const SharedPrefixOptions& options);

// Seeded Poisson arrival times (seconds from 0) of `count` requests at `rate_per_s`.
std::vector<double> PoissonArrivals(int count, double rate_per_s, std::uint64_t seed);

}  // namespace kvroute::workload
