#include "tokenize/simple_tokenizer.h"

#include <gtest/gtest.h>

namespace kvroute::tokenize {
namespace {

TEST(SimpleTokenizerTest, RoundTripsArbitraryText) {
  SimpleTokenizer tok;
  for (std::string text : {"", "hello", "hello world", "  multiple   spaces\n\n",
                           "héllo 🙂 日本語", "a<|im_start|>b<|x|>c<|", "tab\tsep"}) {
    auto ids = tok.Encode(text, false);
    auto back = tok.Decode(ids);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, text);
    EXPECT_EQ(tok.Encode(*back, false), ids);
  }
}

TEST(SimpleTokenizerTest, AppendingAtWhitespaceKeepsPrefixIds) {
  SimpleTokenizer tok;
  auto a = tok.Encode("the quick brown fox", false);
  auto b = tok.Encode("the quick brown fox jumps over", false);
  ASSERT_GT(b.size(), a.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
}

TEST(SimpleTokenizerTest, SpecialTokensAreSingleIds) {
  SimpleTokenizer tok;
  auto ids = tok.Encode("<|im_start|>user\nhi<|im_end|>", false);
  EXPECT_EQ(ids.front(), SimpleTokenizer::kImStart);
  EXPECT_EQ(ids.back(), SimpleTokenizer::kImEnd);
  EXPECT_EQ(tok.Encode("x", true).front(), SimpleTokenizer::kBos);
}

TEST(SimpleTokenizerTest, UnknownIdIsAnError) {
  SimpleTokenizer tok;
  EXPECT_FALSE(tok.Decode({7}).has_value());
  EXPECT_FALSE(tok.Decode({SimpleTokenizer::kBase}).has_value());  // length 0 chunk
}

TEST(SimpleTokenizerTest, ChatTemplateIsChatMl) {
  SimpleTokenizer tok;
  ChatRequest req;
  req.messages = {{.role = "system", .content = "be brief"}, {.role = "user", .content = "hi"}};
  auto text = tok.RenderChat(req);
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(*text,
            "<|im_start|>system\nbe "
            "brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  // A later turn's prompt starts with the earlier turn's prompt (minus the generation prompt).
  req.add_generation_prompt = false;
  auto turn1 = tok.EncodeChat(req).value();
  req.messages.push_back({.role = "assistant", .content = "ok"});
  req.messages.push_back({.role = "user", .content = "more"});
  auto turn2 = tok.EncodeChat(req).value();
  EXPECT_TRUE(std::equal(turn1.begin(), turn1.end(), turn2.begin()));
}

}  // namespace
}  // namespace kvroute::tokenize
