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

}  // namespace

std::vector<TokenId> BuildOutputPalette(const tokenize::Tokenizer& tokenizer) {
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
  if (bare.empty() || space.size() != 1) return {};
  std::vector<TokenId> palette = bare;
  palette.insert(palette.end(), bare.size(), space[0]);
  return palette;
}

}  // namespace kvroute::sim
