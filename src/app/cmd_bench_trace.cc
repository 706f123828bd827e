// kvroute bench conversation-trace: flag parsing around workload::MakeConversationTrace, writing
// a Mooncake JSONL that `kvroute simulate --workload trace` and `kvroute bench run --workload
// trace` replay. No logic here beyond turning flags into options.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <memory>

#include "workload/conversation_trace.h"

namespace kvroute::app {
namespace {

struct TraceFlags {
  workload::ConversationTraceOptions trace;
  std::string out = "conversations.jsonl";
};

int RunConversationTrace(const TraceFlags& f) {
  auto trace = workload::MakeConversationTrace(f.trace);
  if (!trace) {
    std::cerr << "kvroute bench conversation-trace: " << trace.error() << "\n";
    return 2;
  }
  std::ofstream out(f.out);
  if (!out) {
    std::cerr << "kvroute bench conversation-trace: cannot write " << f.out << "\n";
    return 2;
  }
  workload::WriteMooncakeJsonl(*trace, out);
  out.close();
  if (!out) {
    std::cerr << "kvroute bench conversation-trace: write to " << f.out << " failed\n";
    return 2;
  }
  double tokens = 0;
  std::uint32_t longest = 0;
  for (const auto& r : trace->requests) {
    tokens += r.input_tokens;
    longest = std::max(longest, r.input_tokens);
  }
  const double span = trace->requests.back().arrival_s;
  std::cout << "wrote " << f.out << ": " << trace->requests.size() << " requests over "
            << static_cast<int>(span) << " s ("
            << (span > 0 ? static_cast<double>(trace->requests.size()) / span : 0.0)
            << " req/s), mean prompt " << static_cast<int>(tokens / trace->requests.size())
            << " tokens, longest " << longest << "\n";
  return 0;
}

}  // namespace

void RegisterBenchTraceCommand(CLI::App* bench, int* exit_code) {
  auto flags = std::make_shared<TraceFlags>();
  auto& t = flags->trace;
  auto* cmd = bench->add_subcommand(
      "conversation-trace",
      "Write a synthetic multi-turn conversation trace (Mooncake JSONL, 512-token hash\n"
      "blocks): conversations start in Poisson bursts, each turn resends the whole history\n"
      "plus a heavy-tailed new message, prefixes are private to a conversation except a few\n"
      "shared system prompts, and long conversations outgrow any context limit. Replay it\n"
      "with `kvroute simulate --workload trace --trace FILE` or `kvroute bench run\n"
      "--workload trace --trace FILE`; --trace-speedup there raises the load.");
  cmd->add_option("--out", flags->out, "Output file")->capture_default_str();
  cmd->add_option("--conversations", t.conversations, "Conversations")->capture_default_str();
  cmd->add_option("--conversations-per-s", t.conversations_per_s,
                  "Base rate of new conversations")
      ->capture_default_str();
  cmd->add_option("--burst-factor", t.burst_factor, "Rate multiplier inside a burst (1: none)")
      ->capture_default_str();
  cmd->add_option("--burst-every", t.burst_every_s, "Seconds between burst starts")
      ->capture_default_str();
  cmd->add_option("--burst-length", t.burst_length_s, "Seconds a burst lasts")
      ->capture_default_str();
  cmd->add_option("--mean-turns", t.mean_turns, "Mean turns per conversation (geometric)")
      ->capture_default_str();
  cmd->add_option("--max-turns", t.max_turns, "Turns per conversation at most")
      ->capture_default_str();
  cmd->add_option("--system-prompts", t.system_prompts, "Distinct shared system prompts")
      ->capture_default_str();
  cmd->add_option("--system-prompt-tokens", t.system_prompt_tokens, "Tokens per system prompt")
      ->capture_default_str();
  cmd->add_option("--first-input-median", t.first_input_median_tokens,
                  "First message: log-normal median, tokens")
      ->capture_default_str();
  cmd->add_option("--turn-input-median", t.turn_input_median_tokens,
                  "Follow-up message: log-normal median, tokens")
      ->capture_default_str();
  cmd->add_option("--turn-input-sigma", t.turn_input_sigma, "Follow-up message: log-normal sigma")
      ->capture_default_str();
  cmd->add_option("--output-median", t.output_median_tokens, "Output: log-normal median, tokens")
      ->capture_default_str();
  cmd->add_option("--think-median", t.think_median_s, "Pause before the next turn: median, s")
      ->capture_default_str();
  cmd->add_option("--seed", t.seed, "Seed")->capture_default_str();
  cmd->callback([flags, exit_code] { *exit_code = RunConversationTrace(*flags); });
}

}  // namespace kvroute::app
