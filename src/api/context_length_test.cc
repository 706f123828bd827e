#include "api/context_length.h"

#include <gtest/gtest.h>

namespace kvroute::api {
namespace {

TEST(ContextLength, FittingRequestReturnsMaxTokens) {
  auto r = CheckContextLength(100, 50, 4096);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 50);
}

TEST(ContextLength, ExactlyFullContextFits) {
  auto r = CheckContextLength(4000, 96, 4096);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 96);
}

TEST(ContextLength, AbsentMaxTokensGetsTheRestOfTheContext) {
  auto r = CheckContextLength(1000, std::nullopt, 4096);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 3096);
}

TEST(ContextLength, TooManyCompletionTokensUsesVllmWording) {
  auto r = CheckContextLength(2778, 8000, 4096);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().message,
            "This model's maximum context length is 4096 tokens. However, you requested 10778 "
            "tokens (2778 in the messages, 8000 in the completion). Please reduce the length of "
            "the messages or completion.");
}

TEST(ContextLength, PromptAloneTooLongUsesVllmWording) {
  auto r = CheckContextLength(8231, 16, 8192);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "This model's maximum context length is 8192 tokens. However, you requested 8231 "
            "tokens in the messages, Please reduce the length of the messages.");
}

TEST(ContextLength, PromptFillingTheContextIsRefused) {
  EXPECT_FALSE(CheckContextLength(4096, std::nullopt, 4096));
}

TEST(ContextLength, HugeMaxTokensDoesNotOverflow) {
  auto r = CheckContextLength(10, INT64_MAX, 4096);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("9223372036854775817 tokens"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::api
