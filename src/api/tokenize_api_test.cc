#include "api/tokenize_api.h"

#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>

namespace kvroute::api {
namespace {

TEST(TokenizeRequest, CompletionForm) {
  auto r = ParseTokenizeRequest(R"({"model":"m","prompt":"hello"})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->IsChat());
  EXPECT_EQ(std::get<std::string>(r->input), "hello");
  EXPECT_EQ(r->model, "m");
  EXPECT_TRUE(r->add_special_tokens);
  EXPECT_FALSE(r->return_token_strs);
}

TEST(TokenizeRequest, ModelIsOptionalAndEmptyPromptAllowed) {
  auto r = ParseTokenizeRequest(R"({"prompt":""})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->model);
  EXPECT_EQ(std::get<std::string>(r->input), "");
}

TEST(TokenizeRequest, ChatFormDefaultsToNoSpecialTokens) {
  auto r = ParseTokenizeRequest(
      R"({"messages":[{"role":"user","content":"hi"}],"return_token_strs":true})");
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->IsChat());
  EXPECT_FALSE(r->add_special_tokens);
  EXPECT_TRUE(r->return_token_strs);
  const auto& chat = std::get<tokenize::ChatRequest>(r->input);
  EXPECT_EQ(chat.messages.at(0).content, "hi");
  EXPECT_TRUE(chat.add_generation_prompt);
}

TEST(TokenizeRequest, ExplicitAddSpecialTokensWins) {
  auto r = ParseTokenizeRequest(R"({"prompt":"x","add_special_tokens":false})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->add_special_tokens);
}

TEST(DetokenizeRequest, ReadsTokens) {
  auto r = ParseDetokenizeRequest(R"({"model":"m","tokens":[5,0,42]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tokens, (std::vector<TokenId>{5, 0, 42}));
}

TEST(DetokenizeRequest, EmptyTokenListIsAllowed) {
  auto r = ParseDetokenizeRequest(R"({"tokens":[]})");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->tokens.empty());
}

TEST(TokenizeResponse, FieldsInVllmOrder) {
  EXPECT_EQ(boost::json::serialize(TokenizeResponseJson({1, 2, 3}, 4096, std::nullopt)),
            R"({"count":3,"max_model_len":4096,"tokens":[1,2,3],"token_strs":null})");
}

TEST(TokenizeResponse, TokenStringsWhenAsked) {
  const auto j = TokenizeResponseJson({7}, 10, std::vector<std::string>{"a"});
  EXPECT_EQ(j.at("token_strs").as_array().at(0).as_string(), "a");
}

TEST(DetokenizeResponse, Prompt) {
  EXPECT_EQ(boost::json::serialize(DetokenizeResponseJson("hi")), R"({"prompt":"hi"})");
}

}  // namespace
}  // namespace kvroute::api
