#include "sim/output_palette.h"

#include <string>

namespace kvroute::sim {
namespace {

// Common short English words; short enough for byte-chunking tokenizers too.
constexpr const char* kWords[] = {
    "the", "of",  "and", "to",  "in",  "is",  "it",  "for", "on",  "was", "as",  "at",
    "by",  "we",  "be",  "or",  "an",  "are", "not", "but", "can", "has", "had", "you",
    "all", "new", "one", "two", "may", "use", "way", "see", "get", "how", "its", "our",
    "out", "day", "now", "old", "any", "big", "end", "few", "let", "put", "say", "set",
};

std::vector<TokenId> SingleTokenCandidates(const tokenize::Tokenizer& tokenizer) {
  std::vector<TokenId> spaced, bare;
  for (const char* word : kWords) {
    auto with_space = tokenizer.Encode(std::string(" ") + word, false);
    if (with_space.size() == 1) {
      spaced.push_back(with_space[0]);
      continue;
    }
    auto alone = tokenizer.Encode(word, false);
    if (alone.size() == 1) bare.push_back(alone[0]);
  }
  if (!spaced.empty()) return spaced;
  auto space = tokenizer.Encode(" ", false);
  if (space.size() == 1) bare.push_back(space[0]);
  return bare;
}

// Whether the text of `a` followed by `b` encodes back to exactly {a, b}.
bool PairRoundTrips(const tokenize::Tokenizer& tokenizer, TokenId a, TokenId b) {
  auto text = tokenizer.Decode({a, b});
  if (!text) return false;
  auto ids = tokenizer.Encode(*text, false);
  return ids.size() == 2 && ids[0] == a && ids[1] == b;
}

}  // namespace

std::vector<TokenId> BuildOutputPalette(const tokenize::Tokenizer& tokenizer) {
  // Greedy: keep a candidate only if it round-trips next to itself and next to every word
  // kept before it, in both orders. Otherwise a multi-turn client that sends the reply text
  // back re-tokenizes it differently ("of"+"the" → "oft"+"he" under 3-byte chunking) and the
  // engine's cached blocks of that reply are never hit again, which no real engine does.
  std::vector<TokenId> palette;
  for (TokenId candidate : SingleTokenCandidates(tokenizer)) {
    bool fits = PairRoundTrips(tokenizer, candidate, candidate);
    for (std::size_t i = 0; fits && i < palette.size(); ++i) {
      fits = PairRoundTrips(tokenizer, palette[i], candidate) &&
             PairRoundTrips(tokenizer, candidate, palette[i]);
    }
    if (fits) palette.push_back(candidate);
  }
  return palette;
}

}  // namespace kvroute::sim
