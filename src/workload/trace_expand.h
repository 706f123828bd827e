// Turning a trace's hash ids into concrete prompts.
//
// Mooncake traces carry no text, only 512-token block ids. kvroute bench expands each id into a
// deterministic run of token ids drawn from a vocabulary palette (ids the target's tokenizer
// accepts), so equal ids at equal positions give equal prefixes and the engines' prefix caches
// see exactly the reuse the trace describes. Tokens past the last id (traces whose generator
// wrote input_length // 512 ids) are unique to the request.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "workload/trace.h"
#include "common/types.h"

namespace kvroute::workload {

struct ExpandOptions {
  // Scales every hash block (and so the prompt): 2.0 turns 512-token blocks into 1,024.
  double prefix_multiplier = 1.0;
  // Salt for tokens that no hash id covers; give each request a distinct value.
  std::uint64_t unique_salt = 0;
};

// REQUIRES: !vocabulary.empty(), trace_block_tokens > 0.
std::vector<TokenId> ExpandPrompt(const TraceRequest& request, std::uint32_t trace_block_tokens,
                                  std::span<const TokenId> vocabulary, const ExpandOptions& options);

}  // namespace kvroute::workload
