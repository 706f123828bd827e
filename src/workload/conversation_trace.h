// A synthetic multi-turn conversation trace in the Mooncake format, for testing routing
// policies on traffic shaped like real chat and agent logs without shipping anyone's log.
//
// Each conversation is a chain of turns. Turn k's prompt is turn k-1's prompt, its output and
// a new user (or tool) message, so its hash ids are the previous prompt's full 512-token
// blocks followed by fresh ids (the previous prompt's last partial block changes when text is
// appended to it, so it gets a fresh id too). Only the system prompts (a few, each shared by
// many conversations) are common; everything else is private to one conversation.
//
// Shape, each a knob (defaults in ConversationTraceOptions):
//   - conversations start as a Poisson process whose rate is multiplied by `burst_factor`
//     during `burst_length_s` out of every `burst_every_s` (bursts of new conversations:
//     the arrivals that overload a few workers for a while);
//   - turns per conversation: geometric (a heavy right tail), capped at max_turns;
//   - first message, follow-up message and output lengths: log-normal (heavy-tailed: tool
//     outputs and pasted documents); prompts grow past any context limit in long
//     conversations, as real logs do;
//   - the next turn is sent after the previous one's expected service time plus a
//     log-normal think time (the trace is open loop, as Mooncake traces are).
//
// Deterministic: the same options give the same trace, byte for byte.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <ostream>

#include "workload/trace.h"

namespace kvroute::workload {

struct ConversationTraceOptions {
  int conversations = 2000;
  double conversations_per_s = 0.55;  // base rate of new conversations
  double burst_factor = 4;            // rate multiplier inside a burst (1: no bursts)
  double burst_every_s = 600;
  double burst_length_s = 60;
  double mean_turns = 6;  // geometric, >= 1
  int max_turns = 80;
  int system_prompts = 8;
  std::uint32_t system_prompt_tokens = 1536;
  double first_input_median_tokens = 2000;  // log-normal median and sigma
  double first_input_sigma = 1.0;
  double turn_input_median_tokens = 600;
  double turn_input_sigma = 1.5;
  double output_median_tokens = 250;
  double output_sigma = 0.8;
  std::uint32_t max_output_tokens = 4096;
  std::uint32_t max_message_tokens = 60000;  // one message's cap (a pasted document)
  double think_median_s = 15;
  double think_sigma = 1.0;
  double service_s_per_output_token = 0.03;  // the client's expected decode pace
  std::uint64_t seed = 1;
};

inline constexpr std::uint32_t kConversationBlockTokens = 512;

// Error text names the bad option.
std::expected<Trace, std::string> MakeConversationTrace(const ConversationTraceOptions& options);

// Mooncake JSONL: {"timestamp": ms, "input_length", "output_length", "hash_ids": [...]} per
// line, in arrival order (ParseMooncakeJsonl reads it back to the same trace, to the ms).
void WriteMooncakeJsonl(const Trace& trace, std::ostream& out);

}  // namespace kvroute::workload
