// AddedTokenMatcher: finds a tokenizer's added tokens (special tokens such as <|im_start|> and
// non-special ones such as <think>) in text, leftmost-longest, as the Rust tokenizers crate
// (aho-corasick LeftmostLongest) and tokenizers.js (a trie) do.
//
// The text between matches is what the model tokenizes; because every match is a cut, BPE
// never merges across an added token, which also makes each segment independently cacheable.
//
// Ownership: owns a byte trie of the token contents. Thread safety: immutable after Build.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/types.h"

namespace kvroute::tokenize {

struct TextPiece {
  std::string_view text;
  std::optional<TokenId> token;  // set when `text` is an added token
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<std::pair<std::string, TokenId>>& tokens);

  bool empty() const { return nodes_.size() <= 1; }

  // Appends the pieces of `text` in order: added tokens and the (non-empty) text between.
  void Split(std::string_view text, std::vector<TextPiece>* out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::uint32_t>> children;
    std::int64_t token = -1;
  };
  // Length of the longest token starting at text[pos] (0 if none) and its id.
  std::size_t LongestAt(std::string_view text, std::size_t pos, TokenId* id) const;

  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};
  int single_first_byte_ = -1;  // when every token starts with the same byte: memchr scan
};

}  // namespace kvroute::tokenize
