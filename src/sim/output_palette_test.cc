#include "sim/output_palette.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Many seeds and lengths (docs/simulation.md "Fidelity"): every sampled reply re-encodes to
// itself, and a next turn that carries it back as assistant text (ChatML, as kvroute bench
// sends it) starts with exactly the ids the engine held: generation prompt + reply. So the
// live agentic client hits the reply's cached blocks, as the simulator (which appends the
// generated ids) assumes.
TEST(OutputPaletteTest, RepliesSentBackAsChatHistoryKeepTheirIdsForManySeeds) {
  tokenize::SimpleTokenizer tok;
  auto palette = BuildOutputPalette(tok);
  ASSERT_FALSE(palette.empty());
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<TokenId> reply(1 + rng() % 300);
    for (TokenId& id : reply) id = palette[rng() % palette.size()];
    auto text = tok.Decode(reply);
    ASSERT_TRUE(text.has_value());
    ASSERT_EQ(tok.Encode(*text, false), reply) << "seed " << seed;

    tokenize::ChatRequest turn;
    turn.messages = {{"system", "you are terse"}, {"user", "first question here"}};
    auto held = tok.EncodeChat(turn);  // what the engine prefilled
    ASSERT_TRUE(held.has_value());
    held->insert(held->end(), reply.begin(), reply.end());  // + what it generated
    turn.messages.push_back({"assistant", *text});
    turn.messages.push_back({"user", "second question"});
    auto next = tok.EncodeChat(turn);
    ASSERT_TRUE(next.has_value());
    ASSERT_GE(next->size(), held->size());
    EXPECT_TRUE(std::equal(held->begin(), held->end(), next->begin())) << "seed " << seed;
  }
}

TEST(OutputPaletteTest, NoSpecialTokensInThePalette) {
  tokenize::SimpleTokenizer tok;
  for (TokenId id : BuildOutputPalette(tok)) EXPECT_GE(id, tokenize::SimpleTokenizer::kBase);
}

}  // namespace
}  // namespace kvroute::sim
