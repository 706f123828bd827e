#include "sim/output_palette.h"

#include <gtest/gtest.h>

#include <set>

#include "tokenize/simple_tokenizer.h"

namespace kvroute::sim {
namespace {

TEST(OutputPaletteTest, SimpleTokenizerGetsWordsAndSpacesThatDecodeToText) {
  tokenize::SimpleTokenizer tok;
  auto palette = BuildOutputPalette(tok);
  ASSERT_FALSE(palette.empty());
  std::set<std::string> pieces;
  for (TokenId id : palette) {
    auto text = tok.Decode({id});
    ASSERT_TRUE(text.has_value());
    pieces.insert(*text);
  }
  EXPECT_TRUE(pieces.contains(" "));
  EXPECT_TRUE(pieces.contains("the"));
  // About every other token is a space, so sampled text reads as words.
  auto spaces = std::count(palette.begin(), palette.end(), tok.Encode(" ", false)[0]);
  EXPECT_EQ(static_cast<std::size_t>(spaces) * 2, palette.size());
}

TEST(OutputPaletteTest, NoSpecialTokensInThePalette) {
  tokenize::SimpleTokenizer tok;
  for (TokenId id : BuildOutputPalette(tok)) EXPECT_GE(id, tokenize::SimpleTokenizer::kBase);
}

}  // namespace
}  // namespace kvroute::sim
