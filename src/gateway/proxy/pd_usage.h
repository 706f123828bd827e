// The usage a client sees for a request served in two legs (prefill on P, decode on D), merged
// as llm-d's routing sidecar does: the decode leg's answer, with usage.prompt_tokens_details.
// cached_tokens replaced by the prefill leg's (the prefix P found in its own cache; D counts
// every pulled token as cached, which says nothing about the cluster's cache reuse).
//
//   CachedTokensOf        the prefill leg's JSON answer → its cached_tokens (0 when it reports
//                         usage without details; nullopt without usage)
//   MergePrefillUsage     a buffered decode answer (JSON) with the merged usage
//   SseUsageRewriter      a streamed decode answer, piece by piece: events carrying a usage
//                         object (the final usage chunk) rewritten, every other byte as is
//
// Thread safety: pure functions; one SseUsageRewriter per stream, one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvroute::gateway {

std::optional<std::uint64_t> CachedTokensOf(std::string_view prefill_answer);

// The body unchanged when it is not a JSON object with a `usage` object.
std::string MergePrefillUsage(std::string_view decode_answer, std::uint64_t cached_tokens);

class SseUsageRewriter {
 public:
  explicit SseUsageRewriter(std::uint64_t cached_tokens) : cached_tokens_(cached_tokens) {}

  // The bytes to relay for `piece`: every complete event (up to the last blank line) seen so
  // far, rewritten where it carries usage. An incomplete trailing event is held until its end
  // arrives (an SSE client acts only on complete events, so holding it delays nothing).
  std::string Feed(std::string_view piece);
  // The stream ended: whatever was held, as is.
  std::string Finish();

 private:
  std::string RewriteEvent(std::string_view event) const;

  std::uint64_t cached_tokens_;
  std::string held_;
};

}  // namespace kvroute::gateway
