#include "workload/conversation_trace.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kvroute::workload {
namespace {

// One conversation's pending turn, for the merge into arrival order.
struct Turn {
  double at_s = 0;
  int conversation = 0;
  int turn = 0;
};

std::expected<void, std::string> Validate(const ConversationTraceOptions& o) {
  const auto bad = [](const char* what) {
    return std::unexpected(std::string("conversation trace: ") + what);
  };
  if (o.conversations <= 0) return bad("conversations must be positive");
  if (!(o.conversations_per_s > 0)) return bad("conversations_per_s must be positive");
  if (!(o.burst_factor >= 1)) return bad("burst_factor must be >= 1");
  if (!(o.burst_every_s > 0) || !(o.burst_length_s >= 0) || o.burst_length_s > o.burst_every_s) {
    return bad("burst_length_s must be within [0, burst_every_s] and burst_every_s positive");
  }
  if (!(o.mean_turns >= 1)) return bad("mean_turns must be >= 1");
  if (o.max_turns < 1) return bad("max_turns must be >= 1");
  if (o.system_prompts < 1) return bad("system_prompts must be >= 1");
  for (double m : {o.first_input_median_tokens, o.turn_input_median_tokens,
                   o.output_median_tokens, o.think_median_s}) {
    if (!(m > 0)) return bad("medians must be positive");
  }
  for (double s : {o.first_input_sigma, o.turn_input_sigma, o.output_sigma, o.think_sigma}) {
    if (!(s >= 0) || s > 5) return bad("sigmas must be within [0, 5]");
  }
  if (o.max_output_tokens < 1 || o.max_message_tokens < 1) return bad("caps must be positive");
  if (!(o.service_s_per_output_token >= 0)) return bad("service_s_per_output_token must be >= 0");
  return {};
}

}  // namespace

std::expected<Trace, std::string> MakeConversationTrace(const ConversationTraceOptions& o) {
  if (auto ok = Validate(o); !ok) return std::unexpected(ok.error());
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  const auto lognormal = [&](double median, double sigma, double cap) {
    return std::clamp(median * std::exp(sigma * normal(rng)), 1.0, cap);
  };
  const double continue_p = 1.0 - 1.0 / o.mean_turns;  // geometric turns, mean mean_turns

  // Conversation starts: a Poisson process thinned from the burst rate (exact for a
  // piecewise-constant rate).
  std::vector<double> starts;
  const double peak = o.conversations_per_s * o.burst_factor;
  std::exponential_distribution<double> gap(peak);
  for (double t = 0; static_cast<int>(starts.size()) < o.conversations;) {
    t += gap(rng);
    const bool in_burst = std::fmod(t, o.burst_every_s) < o.burst_length_s;
    const double rate = in_burst ? peak : o.conversations_per_s;
    if (unit(rng) * peak < rate) starts.push_back(t);
  }

  // System prompts: fixed ids 0 .. system_prompts * blocks - 1, shared by conversations.
  const std::uint32_t sys_blocks =
      (o.system_prompt_tokens + kConversationBlockTokens - 1) / kConversationBlockTokens;
  std::uint64_t next_id = static_cast<std::uint64_t>(o.system_prompts) * sys_blocks;

  Trace trace;
  trace.hash_block_tokens = kConversationBlockTokens;
  for (int c = 0; c < o.conversations; ++c) {
    int turns = 1;
    while (turns < o.max_turns && unit(rng) < continue_p) ++turns;
    const auto system = static_cast<std::uint64_t>(rng() % o.system_prompts);
    std::vector<std::uint64_t> ids;
    for (std::uint32_t b = 0; b < sys_blocks; ++b) ids.push_back(system * sys_blocks + b);
    std::uint64_t length = o.system_prompt_tokens;
    double at = starts[static_cast<std::size_t>(c)];
    for (int k = 0; k < turns; ++k) {
      const double message = k == 0 ? lognormal(o.first_input_median_tokens, o.first_input_sigma,
                                                o.max_message_tokens)
                                    : lognormal(o.turn_input_median_tokens, o.turn_input_sigma,
                                                o.max_message_tokens);
      // Appending text changes the last partial block: keep only the full blocks.
      const std::uint64_t keep = length / kConversationBlockTokens;
      ids.resize(std::min<std::size_t>(ids.size(), keep));
      length += static_cast<std::uint64_t>(message);
      const std::uint64_t blocks =
          (length + kConversationBlockTokens - 1) / kConversationBlockTokens;
      while (ids.size() < blocks) ids.push_back(next_id++);
      TraceRequest r;
      r.arrival_s = at;
      r.input_tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(length, UINT32_MAX));
      r.output_tokens = static_cast<std::uint32_t>(
          lognormal(o.output_median_tokens, o.output_sigma, o.max_output_tokens));
      r.hash_ids = ids;
      trace.requests.push_back(r);
      // The answer joins the conversation; the next turn comes after it and a think time.
      const std::uint64_t keep_after = length / kConversationBlockTokens;
      ids.resize(std::min<std::size_t>(ids.size(), keep_after));
      length += r.output_tokens;
      at += r.output_tokens * o.service_s_per_output_token +
            lognormal(o.think_median_s, o.think_sigma, 3600);
    }
  }
  std::stable_sort(trace.requests.begin(), trace.requests.end(),
                   [](const TraceRequest& a, const TraceRequest& b) {
                     return a.arrival_s < b.arrival_s;
                   });
  // Times relative to the first request, whole milliseconds (what the format can say).
  const double t0 = trace.requests.front().arrival_s;
  for (TraceRequest& r : trace.requests) {
    r.arrival_s = std::floor((r.arrival_s - t0) * 1000.0) / 1000.0;
  }
  return trace;
}

void WriteMooncakeJsonl(const Trace& trace, std::ostream& out) {
  for (const TraceRequest& r : trace.requests) {
    out << "{\"timestamp\": " << static_cast<std::uint64_t>(std::llround(r.arrival_s * 1000.0))
        << ", \"input_length\": " << r.input_tokens << ", \"output_length\": " << r.output_tokens
        << ", \"hash_ids\": [";
    for (std::size_t i = 0; i < r.hash_ids.size(); ++i) {
      if (i > 0) out << ", ";
      out << r.hash_ids[i];
    }
    out << "]}\n";
  }
}

}  // namespace kvroute::workload
