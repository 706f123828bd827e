#include "tokenize/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

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
  if (!tok) GTEST_FAIL() << "qwen3 tokenizer files not installed (make setup installs them)";
  EXPECT_EQ(tok->Encode("Hello world!<|im_start|>x", false),
            (std::vector<TokenId>{9707, 1879, 0, 151644, 87}));
  EXPECT_EQ(tok->EosTokenId(), 151645u);
}

TEST_F(HfTokenizerTest, Llama31AddsBosWithSpecialTokens) {
  auto tok = Load("llama3_1");
  if (!tok) GTEST_FAIL() << "llama3_1 tokenizer files not installed (make setup installs them)";
  EXPECT_EQ(tok->Encode("Hello world", true), (std::vector<TokenId>{128000, 9906, 1917}));
  EXPECT_EQ(tok->Encode("Hello world", false), (std::vector<TokenId>{9906, 1917}));
}

TEST_F(HfTokenizerTest, DeepSeekV3SplitsDigitsInThrees) {
  auto tok = Load("deepseek_v3");
  if (!tok) GTEST_FAIL() << "deepseek_v3 tokenizer files not installed (make setup installs them)";
  EXPECT_EQ(tok->Encode(" 12345", false), (std::vector<TokenId>{223, 6895, 1883}));
  EXPECT_EQ(tok->Encode("x", true).front(), 0u);  // BOS from add_bos_token
}

TEST_F(HfTokenizerTest, DecodeInvertsEncode) {
  for (const auto& name : ShippedModelNames()) {
    auto tok = Load(name);
    if (!tok) GTEST_FAIL() << name << " tokenizer files not installed (make setup installs them)";
    const std::string text = "Größe 日本語 🙂\n\tcode(x) <think>";
    auto back = tok->Decode(tok->Encode(text, false));
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, text) << name;
  }
}

TEST_F(HfTokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  auto tok = Load("qwen3");
  if (!tok) GTEST_FAIL() << "qwen3 tokenizer files not installed (make setup installs them)";
  EXPECT_FALSE(tok->Decode({999999999}).has_value());
}

TEST_F(HfTokenizerTest, InvalidUtf8IsEncodedAsReplacementCharacters) {
  auto tok = Load("qwen3");
  if (!tok) GTEST_FAIL() << "qwen3 tokenizer files not installed (make setup installs them)";
  EXPECT_EQ(tok->Encode("a\xFF"
                        "b",
                        false),
            tok->Encode("a\xEF\xBF\xBD"
                        "b",
                        false));
}

TEST_F(HfTokenizerTest, SegmentsBetweenSpecialTokensEncodeIndependently) {
  auto tok = Load("qwen3");
  if (!tok) GTEST_FAIL() << "qwen3 tokenizer files not installed (make setup installs them)";
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

namespace kvroute::tokenize {
namespace {

ChatRequest TwoTurnChat() {
  ChatRequest req;
  req.messages = {{.role = "system", .content = "Be brief."},
                  {.role = "user", .content = "Hello"},
                  {.role = "assistant", .content = "Hi there"},
                  {.role = "user", .content = "Bye"}};
  return req;
}

TEST(HfChatTest, RendersEachShippedTemplate) {
  const std::pair<std::string, std::string> expected[] = {
      {"qwen3",
       "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
       "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
       "<|im_start|>assistant\n"},
      {"llama3_1",
       "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {"deepseek_v3",
       "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜>"
       "<｜User｜>Bye<｜Assistant｜>"},
  };
  for (const auto& [name, text] : expected) {
    auto dir = FindShippedModelDir(name);
    if (!dir) GTEST_FAIL() << name << " tokenizer files not installed (make setup installs them)";
    auto tok = LoadHfTokenizer(*dir);
    ASSERT_TRUE(tok.has_value()) << tok.error();
    auto rendered = (*tok)->RenderChat(TwoTurnChat());
    ASSERT_TRUE(rendered.has_value()) << rendered.error();
    EXPECT_EQ(*rendered, text) << name;
  }
}

TEST(HfChatTest, EncodeChatEqualsEncodingTheRenderedPromptAndReusesSegments) {
  auto dir = FindShippedModelDir("qwen3");
  if (!dir) GTEST_FAIL() << "qwen3 tokenizer files not installed (make setup installs them)";
  auto loaded = LoadHfTokenizer(*dir);
  ASSERT_TRUE(loaded.has_value());
  auto tok = std::static_pointer_cast<const HfTokenizer>(*loaded);
  ChatRequest req = TwoTurnChat();
  req.messages[1].content = std::string(400, 'x') + " a long first user turn that is cached";
  auto rendered = tok->RenderChat(req);
  ASSERT_TRUE(rendered.has_value());
  const auto expected = tok->Encode(*rendered, false);
  const auto before = tok->SegmentCacheStats();
  EXPECT_EQ(tok->EncodeChat(req).value(), expected);  // cold
  EXPECT_EQ(tok->EncodeChat(req).value(), expected);  // warm
  const auto after = tok->SegmentCacheStats();
  EXPECT_GT(after.hits, before.hits);
}

}  // namespace
}  // namespace kvroute::tokenize

namespace kvroute::tokenize {
namespace {

TEST(HfChatTest, ConcurrentEncodeChatMatchesSingleThreadedResults) {
  // Eight threads encode overlapping conversations (shared prefixes hit the same cache
  // segments, new turns insert); every result must equal the uncached single-thread encoding.
  auto dir = FindShippedModelDir("llama3_1");
  if (!dir) GTEST_FAIL() << "llama3_1 tokenizer files not installed (make setup installs them)";
  auto loaded = LoadHfTokenizer(*dir);
  ASSERT_TRUE(loaded.has_value());
  const TokenizerPtr tok = *loaded;
  std::vector<ChatRequest> requests;
  for (int n = 1; n <= 12; ++n) {
    ChatRequest req;
    req.messages.push_back({.role = "system", .content = std::string(300, 's') + " system"});
    for (int t = 0; t < n; ++t) {
      req.messages.push_back(
          {.role = t % 2 == 0 ? "user" : "assistant",
           .content = "turn " + std::to_string(t) + " " + std::string(100 + t * 10, 'a' + t % 26)});
    }
    requests.push_back(std::move(req));
  }
  std::vector<std::vector<TokenId>> expected;
  for (const auto& req : requests) expected.push_back(tok->Encode(*tok->RenderChat(req), false));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 8; ++th) {
    threads.emplace_back([&, th] {
      for (int k = 0; k < 60; ++k) {
        const std::size_t i = static_cast<std::size_t>((k * 5 + th) % 12);
        auto ids = tok->EncodeChat(requests[i]);
        if (!ids || *ids != expected[i]) mismatches.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace kvroute::tokenize
