// SimpleTokenizer: deterministic, invertible, needs no model files.
//
// Text is cut into pieces at whitespace boundaries (a run of whitespace, or a run of
// non-whitespace), and each piece into chunks of at most 3 bytes. A chunk's id encodes its
// bytes directly: id = kBase + (len << 24 | b0 << 16 | b1 << 8 | b2), so Decode is exact and
// Encode(Decode(ids)) == ids for every id it produced. About 3 bytes per token, close to real
// BPE tokenizers' 3.5-4, so token counts in benchmarks stay realistic.
//
// Appending text after a whitespace boundary never changes the ids before it: prefixes of a
// growing conversation tokenize to prefixes, which is what prefix caching needs.
//
// Special tokens (ids 0..kBase-1): <|bos|>=1, <|eos|>=2, <|im_start|>=3, <|im_end|>=4. They are
// recognised in text (so rendered chat prompts carry them as single tokens).
// The chat template is ChatML:
//   <|im_start|>{role}\n{content}<|im_end|>\n ... and "<|im_start|>assistant\n" when
//   add_generation_prompt.
//
// Thread safety: immutable; all methods are safe to call concurrently.
#pragma once

#include "tokenize/tokenizer.h"

namespace kvroute::tokenize {

class SimpleTokenizer final : public Tokenizer {
 public:
  static constexpr TokenId kBos = 1, kEos = 2, kImStart = 3, kImEnd = 4;
  static constexpr TokenId kBase = 16;

  std::vector<TokenId> Encode(std::string_view text, bool add_special_tokens) const override;
  std::expected<std::string, std::string> Decode(const std::vector<TokenId>& ids) const override;
  std::expected<std::string, std::string> RenderChat(const ChatRequest& request) const override;
  std::expected<std::vector<TokenId>, std::string> EncodeChat(
      const ChatRequest& request) const override;
  std::size_t VocabSize() const override { return kBase + (3u << 24) + (1u << 24); }
  TokenId EosTokenId() const override { return kEos; }
};

}  // namespace kvroute::tokenize
