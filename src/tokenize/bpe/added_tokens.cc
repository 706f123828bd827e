#include "tokenize/bpe/added_tokens.h"

#include <cstring>

namespace kvroute::tokenize {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<std::pair<std::string, TokenId>>& tokens) {
  for (const auto& [content, id] : tokens) {
    if (content.empty()) continue;
    std::uint32_t node = 0;
    for (unsigned char c : content) {
      std::uint32_t child = 0;
      for (const auto& [byte, index] : nodes_[node].children) {
        if (byte == c) child = index;
      }
      if (child == 0) {
        child = static_cast<std::uint32_t>(nodes_.size());
        nodes_[node].children.emplace_back(c, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    nodes_[node].token = id;
    first_byte_[static_cast<unsigned char>(content[0])] = true;
  }
  int distinct = 0;
  for (int b = 0; b < 256; ++b) {
    if (first_byte_[b]) {
      ++distinct;
      single_first_byte_ = b;
    }
  }
  if (distinct != 1) single_first_byte_ = -1;
}

std::size_t AddedTokenMatcher::LongestAt(std::string_view text, std::size_t pos,
                                         TokenId* id) const {
  std::uint32_t node = 0;
  std::size_t best = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::uint32_t child = 0;
    for (const auto& [byte, index] : nodes_[node].children) {
      if (byte == c) {
        child = index;
        break;
      }
    }
    if (child == 0) break;
    node = child;
    if (nodes_[node].token >= 0) {
      best = i + 1 - pos;
      *id = static_cast<TokenId>(nodes_[node].token);
    }
  }
  return best;
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<TextPiece>* out) const {
  if (empty()) {
    if (!text.empty()) out->push_back(TextPiece{text, std::nullopt});
    return;
  }
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (single_first_byte_ >= 0) {
      const void* hit = std::memchr(text.data() + i, single_first_byte_, text.size() - i);
      if (hit == nullptr) break;
      i = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
    } else if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    TokenId id = 0;
    const std::size_t len = LongestAt(text, i, &id);
    if (len == 0) {
      ++i;
      continue;
    }
    if (i > start) out->push_back(TextPiece{text.substr(start, i - start), std::nullopt});
    out->push_back(TextPiece{text.substr(i, len), id});
    i += len;
    start = i;
  }
  if (start < text.size()) out->push_back(TextPiece{text.substr(start), std::nullopt});
}

}  // namespace kvroute::tokenize
