#include "tokenize/bpe/pre_tokenizer.h"

#include <gtest/gtest.h>

namespace kvroute::tokenize {
namespace {

// Llama 3 / Qwen style pattern.
constexpr char kPattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> Split(const PreTokenizer& p, std::string_view text) {
  std::vector<std::string_view> words;
  p.Split(text, &words);
  return {words.begin(), words.end()};
}

TEST(PreTokenizerTest, SplitsWordsNumbersAndPunctuation) {
  auto p = PreTokenizer::Create({kPattern});
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_EQ(Split(*p, "Hello, world 12345!"),
            (std::vector<std::string>{"Hello", ",", " world", " ", "123", "45", "!"}));
}

TEST(PreTokenizerTest, ContractionsAreCaseInsensitive) {
  auto p = PreTokenizer::Create({kPattern});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(Split(*p, "I'M"), (std::vector<std::string>{"I", "'M"}));
}

TEST(PreTokenizerTest, TrailingWhitespaceRunKeepsLastSpaceForNextWord) {
  auto p = PreTokenizer::Create({kPattern});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(Split(*p, "a   b"), (std::vector<std::string>{"a", "  ", " b"}));
}

TEST(PreTokenizerTest, NextLineCharacterIsWhitespace) {
  // U+0085 is White_Space (Rust regex, tokenizers.js) though PCRE2's plain \s misses it.
  auto p = PreTokenizer::Create({kPattern});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(Split(*p,
                  "a\xC2\x85\xC2\x85"
                  "b"),
            (std::vector<std::string>{"a", "\xC2\x85",
                                      "\xC2\x85"
                                      "b"}));
}

TEST(PreTokenizerTest, SequenceRefinesEarlierPieces) {
  // DeepSeek-V3 style: digits first, then the rest.
  auto p = PreTokenizer::Create({R"(\p{N}{1,3})", R"(\s+|[a-z]+)"});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(Split(*p, "ab12345 cd"), (std::vector<std::string>{"ab", "123", "45", " ", "cd"}));
}

TEST(PreTokenizerTest, PiecesConcatenateToTheInput) {
  auto p = PreTokenizer::Create({kPattern});
  ASSERT_TRUE(p.has_value());
  const std::string text = "  mixed\t\ttext\r\n\n 日本語 🙂🙂 x=1.5e-3;\n";
  std::string joined;
  for (const auto& w : Split(*p, text)) joined += w;
  EXPECT_EQ(joined, text);
}

TEST(PreTokenizerTest, LongWhitespaceRunsDoNotExhaustTheMatcher) {
  auto p = PreTokenizer::Create({kPattern});
  ASSERT_TRUE(p.has_value());
  const std::string text = std::string(200000, ' ') + "x";
  EXPECT_EQ(Split(*p, text), (std::vector<std::string>{std::string(199999, ' '), " x"}));
}

TEST(PreTokenizerTest, InvalidPatternIsALoadError) {
  EXPECT_FALSE(PreTokenizer::Create({"(unclosed"}).has_value());
}

TEST(PreTokenizerTest, RewritesWhitespaceEscapesOnly) {
  EXPECT_EQ(RewritePatternForPcre2(R"(\s+\S\\s\p{L})"),
            R"(\p{White_Space}+\P{White_Space}\\s\p{L})");
}

}  // namespace
}  // namespace kvroute::tokenize
