#include "sim/output_palette.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "tokenize/simple_tokenizer.h"

namespace kvroute::sim {
namespace {

TEST(OutputPaletteTest, SimpleTokenizerGetsWordsThatDecodeToText) {
  tokenize::SimpleTokenizer tok;
  auto palette = BuildOutputPalette(tok);
  ASSERT_FALSE(palette.empty());
  std::set<std::string> pieces;
  for (TokenId id : palette) {
    auto text = tok.Decode({id});
    ASSERT_TRUE(text.has_value());
    pieces.insert(*text);
  }
  EXPECT_TRUE(pieces.contains("the"));
  EXPECT_TRUE(pieces.contains("and"));
}

// The property multi-turn caching depends on: sampled output, sent back as text, encodes to
// the same ids. "of" and " " are single tokens of SimpleTokenizer but break it ("of"+"the"
// re-chunks as "oft"+"he"; two spaces become one token), so they must not be in the palette.
TEST(OutputPaletteTest, AnySampledSequenceReEncodesToTheSameIds) {
  tokenize::SimpleTokenizer tok;
  auto palette = BuildOutputPalette(tok);
  ASSERT_FALSE(palette.empty());
  std::mt19937_64 rng(7);
  std::vector<TokenId> sampled;
  for (int i = 0; i < 4000; ++i) sampled.push_back(palette[rng() % palette.size()]);
  auto text = tok.Decode(sampled);
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(tok.Encode(*text, false), sampled);
  EXPECT_EQ(std::count(palette.begin(), palette.end(), tok.Encode(" ", false)[0]), 0);
  EXPECT_EQ(std::count(palette.begin(), palette.end(), tok.Encode("of", false)[0]), 0);
}

TEST(OutputPaletteTest, NoSpecialTokensInThePalette) {
  tokenize::SimpleTokenizer tok;
  for (TokenId id : BuildOutputPalette(tok)) EXPECT_GE(id, tokenize::SimpleTokenizer::kBase);
}

}  // namespace
}  // namespace kvroute::sim
