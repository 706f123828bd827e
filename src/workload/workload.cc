#include "workload/workload.h"

#include <algorithm>
#include <array>
#include <random>

namespace kvroute::workload {
namespace {

// Pseudo-words from syllables: readable, varied, and cheap to tokenize.
constexpr std::array<const char*, 24> kSyllables = {
    "ka", "lo", "mi",  "ren", "ta", "vo", "shi", "pu",  "de", "ny", "qua", "zel",
    "bo", "fi", "gar", "hu",  "jo", "ix", "war", "est", "un", "or", "pen", "sa"};

std::string Words(std::mt19937_64& rng, std::size_t count) {
  std::uniform_int_distribution<int> syllables(1, 3);
  std::uniform_int_distribution<std::size_t> pick(0, kSyllables.size() - 1);
  std::uniform_int_distribution<int> punct(0, 11);
  std::string out;
  out.reserve(count * 7);
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) out.push_back(' ');
    const int n = syllables(rng);
    for (int s = 0; s < n; ++s) out += kSyllables[pick(rng)];
    if (punct(rng) == 0) out.push_back('.');
  }
  return out;
}

}  // namespace

std::string MakeText(const tokenize::Tokenizer& tokenizer, std::uint32_t tokens,
                     std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (tokens == 0) return {};
  // Estimate tokens per word on a sample, generate, then top up until the count is reached.
  std::string text = Words(rng, 64);
  double per_word = static_cast<double>(tokenizer.Encode(text, false).size()) / 64.0;
  text = Words(rng, static_cast<std::size_t>(tokens / std::max(per_word, 0.1) * 0.97) + 1);
  std::size_t have = tokenizer.Encode(text, false).size();
  while (have < tokens) {
    const auto missing = static_cast<std::size_t>((tokens - have) / std::max(per_word, 0.1)) + 1;
    text += ' ';
    text += Words(rng, missing);
    have = tokenizer.Encode(text, false).size();
  }
  return text;
}

std::vector<AgenticSession> MakeAgenticSessions(const tokenize::Tokenizer& tokenizer,
                                                const AgenticOptions& options) {
  std::vector<AgenticSession> sessions;
  const std::string common = MakeText(tokenizer, options.common_prefix_tokens, options.seed);
  for (int s = 0; s < options.sessions; ++s) {
    AgenticSession session;
    session.system_prompt = common;
    session.output_tokens = options.output_tokens;
    const std::uint64_t base =
        options.seed * 1000003ULL + static_cast<std::uint64_t>(s) * 7919ULL + 1;
    for (int t = 0; t < options.turns; ++t) {
      std::string turn;
      if (t == 0 && options.session_prefix_tokens > 0) {
        turn = MakeText(tokenizer, options.session_prefix_tokens, base) + "\n\n";
      }
      turn += MakeText(tokenizer, options.turn_input_tokens,
                       base + 101 + static_cast<std::uint64_t>(t));
      session.user_turns.push_back(std::move(turn));
    }
    sessions.push_back(std::move(session));
  }
  return sessions;
}

std::vector<SharedPrefixPrompt> MakeSharedPrefixPrompts(const tokenize::Tokenizer& tokenizer,
                                                        const SharedPrefixOptions& options) {
  std::vector<SharedPrefixPrompt> prompts;
  for (int g = 0; g < options.groups; ++g) {
    const std::uint64_t gseed =
        options.seed * 1000003ULL + static_cast<std::uint64_t>(g) * 131ULL + 7;
    const std::string system = MakeText(tokenizer, options.system_prompt_tokens, gseed);
    for (int p = 0; p < options.prompts_per_group; ++p) {
      prompts.push_back({g, system,
                         MakeText(tokenizer, options.question_tokens,
                                  gseed * 31 + static_cast<std::uint64_t>(p) + 1),
                         options.output_tokens});
    }
  }
  std::mt19937_64 rng(options.seed);
  std::shuffle(prompts.begin(), prompts.end(), rng);
  return prompts;
}

std::vector<double> PoissonArrivals(int count, double rate_per_s, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate_per_s);
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(std::max(count, 0)));
  double t = 0;
  for (int i = 0; i < count; ++i) {
    out.push_back(t);
    t += gap(rng);
  }
  return out;
}

Nanos AgenticTurnPause(const TurnPause& pause, std::uint64_t seed, int session, int turn) {
  Nanos at = pause.think_time;
  if (pause.turn_jitter.count() <= 0) return at;
  // splitmix64 finalizer over (seed, session, turn): a pure function, so both sides agree
  // without sharing a generator's state or its call order.
  auto mix = [](std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  const std::uint64_t draw =
      mix(mix(seed ^ 0x6a177e4ULL) + (static_cast<std::uint64_t>(session) << 20) +
          static_cast<std::uint64_t>(turn));
  return at + Nanos(static_cast<Nanos::rep>(draw %
                                            static_cast<std::uint64_t>(pause.turn_jitter.count())));
}

}  // namespace kvroute::workload
