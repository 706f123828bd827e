#include "tokenize/hf_tokenizer.h"

#include <gtest/gtest.h>

namespace kvroute::tokenize {
namespace {

// Expected ids come from Hugging Face's tokenizers (the oracle test compares thousands more).
class HfTokenizerTest : public ::testing::Test {
 protected:
  static TokenizerPtr Load(std::string_view name) {
    auto dir = FindShippedModelDir(name);
    if (!dir) return nullptr;
    auto tok = LoadHfTokenizer(*dir);
    EXPECT_TRUE(tok.has_value()) << tok.error();
    return tok ? *tok : nullptr;
  }
};

TEST_F(HfTokenizerTest, Qwen3EncodesTextAndSpecialTokens) {
  auto tok = Load("qwen3");
  if (!tok) GTEST_SKIP() << "qwen3 tokenizer files not installed";
  EXPECT_EQ(tok->Encode("Hello world!<|im_start|>x", false),
            (std::vector<TokenId>{9707, 1879, 0, 151644, 87}));
  EXPECT_EQ(tok->EosTokenId(), 151645u);
}

TEST_F(HfTokenizerTest, Llama31AddsBosWithSpecialTokens) {
  auto tok = Load("llama3_1");
  if (!tok) GTEST_SKIP() << "llama3_1 tokenizer files not installed";
  EXPECT_EQ(tok->Encode("Hello world", true), (std::vector<TokenId>{128000, 9906, 1917}));
  EXPECT_EQ(tok->Encode("Hello world", false), (std::vector<TokenId>{9906, 1917}));
}

TEST_F(HfTokenizerTest, DeepSeekV3SplitsDigitsInThrees) {
  auto tok = Load("deepseek_v3");
  if (!tok) GTEST_SKIP() << "deepseek_v3 tokenizer files not installed";
  EXPECT_EQ(tok->Encode(" 12345", false), (std::vector<TokenId>{223, 6895, 1883}));
  EXPECT_EQ(tok->Encode("x", true).front(), 0u);  // BOS from add_bos_token
}

TEST_F(HfTokenizerTest, DecodeInvertsEncode) {
  for (const auto& name : ShippedModelNames()) {
    auto tok = Load(name);
    if (!tok) GTEST_SKIP() << name << " tokenizer files not installed";
    const std::string text = "Größe 日本語 🙂\n\tcode(x) <think>";
    auto back = tok->Decode(tok->Encode(text, false));
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, text) << name;
  }
}

TEST_F(HfTokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  auto tok = Load("qwen3");
  if (!tok) GTEST_SKIP() << "qwen3 tokenizer files not installed";
  EXPECT_FALSE(tok->Decode({999999999}).has_value());
}

TEST_F(HfTokenizerTest, InvalidUtf8IsEncodedAsReplacementCharacters) {
  auto tok = Load("qwen3");
  if (!tok) GTEST_SKIP() << "qwen3 tokenizer files not installed";
  EXPECT_EQ(tok->Encode("a\xFF"
                        "b",
                        false),
            tok->Encode("a\xEF\xBF\xBD"
                        "b",
                        false));
}

TEST_F(HfTokenizerTest, SegmentsBetweenSpecialTokensEncodeIndependently) {
  auto tok = Load("qwen3");
  if (!tok) GTEST_SKIP() << "qwen3 tokenizer files not installed";
  auto a = tok->Encode("hello there", false);
  auto b = tok->Encode(" friend", false);
  auto joined = tok->Encode("hello there<|im_end|> friend", false);
  std::vector<TokenId> expected = a;
  expected.push_back(151645);
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(joined, expected);
}

TEST(HfLoaderTest, MissingDirectoryIsAnError) {
  EXPECT_FALSE(LoadHfTokenizer("/nonexistent/model").has_value());
}

TEST(HfLoaderTest, UnknownShippedModelIsAnError) {
  EXPECT_FALSE(FindShippedModelDir("no_such_model").has_value());
}

}  // namespace
}  // namespace kvroute::tokenize
