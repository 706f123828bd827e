#include "workload/trace_expand.h"

#include <cassert>
#include <cmath>

namespace kvroute::workload {
namespace {

// SplitMix64 finaliser: a cheap, well-mixed function of (id, position).
std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<TokenId> ExpandPrompt(const TraceRequest& request, std::uint32_t trace_block_tokens,
                                  std::span<const TokenId> vocabulary, const ExpandOptions& options) {
  assert(!vocabulary.empty() && trace_block_tokens > 0);
  const auto block = static_cast<std::size_t>(std::llround(trace_block_tokens * options.prefix_multiplier));
  const auto total = static_cast<std::size_t>(std::llround(request.input_tokens * options.prefix_multiplier));
  std::vector<TokenId> tokens;
  tokens.reserve(total);
  for (std::size_t i = 0; i < total; ++i) {
    const std::size_t b = block == 0 ? 0 : i / block;
    const std::size_t offset = i - b * block;
    std::uint64_t h;
    if (b < request.hash_ids.size()) {
      // High bit keeps hashed-block tokens apart from unique tail tokens.
      h = Mix(Mix(request.hash_ids[b] | (1ULL << 63)) ^ offset);
    } else {
      h = Mix(Mix(options.unique_salt) ^ i);
    }
    tokens.push_back(vocabulary[h % vocabulary.size()]);
  }
  return tokens;
}

}  // namespace kvroute::workload
