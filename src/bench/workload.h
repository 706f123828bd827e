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

#include "tokenize/tokenizer.h"

namespace kvroute::bench {

// Seeded text of about `tokens` tokens under `tokenizer` (within a few tokens, never fewer).
std::string MakeText(const tokenize::Tokenizer& tokenizer, std::uint32_t tokens, std::uint64_t seed);

struct AgenticOptions {
  int sessions = 8;
  std::uint32_t common_prefix_tokens = 20000;
  std::uint32_t session_prefix_tokens = 10000;
  int turns = 30;
  std::uint32_t turn_input_tokens = 2048;
  std::uint32_t output_tokens = 900;
  std::uint64_t seed = 1;
};

struct AgenticSession {
  std::string system_prompt;            // the common prefix, identical in every session
  std::vector<std::string> user_turns;  // turn 0 starts with the session prefix
  std::uint32_t output_tokens = 0;      // max_tokens of every turn (with ignore_eos)
};

std::vector<AgenticSession> MakeAgenticSessions(const tokenize::Tokenizer& tokenizer,
                                                const AgenticOptions& options);

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

}  // namespace kvroute::bench
