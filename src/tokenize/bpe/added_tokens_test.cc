#include "tokenize/bpe/added_tokens.h"

#include <gtest/gtest.h>

namespace kvroute::tokenize {
namespace {

using Pieces = std::vector<std::pair<std::string, std::optional<TokenId>>>;

Pieces Split(const AddedTokenMatcher& m, std::string_view text) {
  std::vector<TextPiece> pieces;
  m.Split(text, &pieces);
  Pieces out;
  for (const auto& p : pieces) out.emplace_back(std::string(p.text), p.token);
  return out;
}

TEST(AddedTokenMatcherTest, CutsTextAtTokens) {
  AddedTokenMatcher m({{"<|a|>", 7}});
  const Pieces expected = {{"x", std::nullopt}, {"<|a|>", 7}, {"y", std::nullopt}};
  EXPECT_EQ(Split(m, "x<|a|>y"), expected);
}

TEST(AddedTokenMatcherTest, PrefersTheLongestTokenAtAPosition) {
  AddedTokenMatcher m({{"<|a", 1}, {"<|a|>", 2}});
  const Pieces whole = {{"<|a|>", 2}};
  const Pieces partial = {{"<|a", 1}, {"|", std::nullopt}};
  EXPECT_EQ(Split(m, "<|a|>"), whole);
  EXPECT_EQ(Split(m, "<|a|"), partial);
}

TEST(AddedTokenMatcherTest, AdjacentTokensAndPartialLookalikes) {
  AddedTokenMatcher m({{"<s>", 1}, {"</s>", 2}});
  const Pieces expected = {{"<s>", 1}, {"</s>", 2}, {"<s", std::nullopt}};
  EXPECT_EQ(Split(m, "<s></s><s"), expected);
}

TEST(AddedTokenMatcherTest, EmptyMatcherReturnsTheWholeText) {
  AddedTokenMatcher m;
  const Pieces expected = {{"abc", std::nullopt}};
  EXPECT_EQ(Split(m, "abc"), expected);
  EXPECT_TRUE(Split(m, "").empty());
}

}  // namespace
}  // namespace kvroute::tokenize
