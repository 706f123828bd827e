#include "api/generation_params.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

namespace kvroute::api {
namespace {

GenerationParams ParseOk(std::string_view json, Endpoint e = Endpoint::kCompletions) {
  auto r = ParseGenerationParams(boost::json::parse(json).as_object(), e);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? *r : GenerationParams{};
}

TEST(GenerationParams, DefaultsWhenOnlyModelIsGiven) {
  const GenerationParams p = ParseOk(R"({"model":"m"})");
  EXPECT_EQ(p.model, "m");
  EXPECT_FALSE(p.max_tokens);
  EXPECT_FALSE(p.stream);
  EXPECT_FALSE(p.stream_options);
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_FALSE(p.seed);
  EXPECT_FALSE(p.temperature);
  EXPECT_FALSE(p.top_p);
  EXPECT_EQ(p.n, 1);
  EXPECT_TRUE(p.stop.empty());
  EXPECT_FALSE(p.user);
  EXPECT_FALSE(p.cache_salt);
  EXPECT_FALSE(p.kv_transfer_params);
  EXPECT_FALSE(p.IncludeUsage());
}

TEST(GenerationParams, NullFieldsCountAsAbsent) {
  const GenerationParams p = ParseOk(
      R"({"model":"m","max_tokens":null,"stream":null,"seed":null,"stop":null,
          "temperature":null,"n":null,"kv_transfer_params":null,"cache_salt":null})");
  EXPECT_FALSE(p.max_tokens);
  EXPECT_FALSE(p.stream);
  EXPECT_FALSE(p.kv_transfer_params);
}

TEST(GenerationParams, ReadsEveryField) {
  const GenerationParams p = ParseOk(
      R"({"model":"m","max_tokens":7,"stream":true,"ignore_eos":true,"seed":-3,
          "temperature":0.5,"top_p":1,"n":1,"stop":["a","b"],"user":"u","cache_salt":"s",
          "kv_transfer_params":{"do_remote_decode":true}})");
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.seed, -3);
  EXPECT_DOUBLE_EQ(*p.temperature, 0.5);
  EXPECT_DOUBLE_EQ(*p.top_p, 1.0);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.user, "u");
  EXPECT_EQ(p.cache_salt, "s");
  ASSERT_TRUE(p.kv_transfer_params);
  EXPECT_TRUE(p.kv_transfer_params->at("do_remote_decode").as_bool());
}

TEST(GenerationParams, StopStringBecomesOneEntry) {
  EXPECT_EQ(ParseOk(R"({"model":"m","stop":"END"})").stop, std::vector<std::string>{"END"});
}

TEST(GenerationParams, IntegralFloatIsAnInteger) {
  EXPECT_EQ(ParseOk(R"({"model":"m","max_tokens":16.0})").max_tokens, 16);
}

TEST(GenerationParams, ZeroMaxTokensIsAccepted) {
  EXPECT_EQ(ParseOk(R"({"model":"m","max_tokens":0})").max_tokens, 0);
}

TEST(GenerationParams, StreamOptionsIncludeUsageDefaultsToTrueWhenObjectPresent) {
  const GenerationParams p = ParseOk(R"({"model":"m","stream":true,"stream_options":{}})");
  ASSERT_TRUE(p.stream_options);
  EXPECT_TRUE(p.IncludeUsage());
  EXPECT_FALSE(p.ContinuousUsage());
}

TEST(GenerationParams, EmptyStreamOptionsWithoutStreamAreIgnoredLikeVllm) {
  EXPECT_FALSE(ParseOk(R"({"model":"m","stream_options":{}})").stream_options);
}

TEST(GenerationParams, StreamOptionsFlagsAreRead) {
  const GenerationParams p = ParseOk(
      R"({"model":"m","stream":true,
          "stream_options":{"include_usage":false,"continuous_usage_stats":true}})");
  EXPECT_FALSE(p.IncludeUsage());
  EXPECT_TRUE(p.ContinuousUsage());
}

TEST(GenerationParams, MaxCompletionTokensWinsForChat) {
  const GenerationParams p = ParseOk(R"({"model":"m","max_tokens":5,"max_completion_tokens":9})",
                                     Endpoint::kChatCompletions);
  EXPECT_EQ(p.max_tokens, 9);
}

TEST(GenerationParams, MaxCompletionTokensIsIgnoredForCompletions) {
  const GenerationParams p =
      ParseOk(R"({"model":"m","max_tokens":5,"max_completion_tokens":9})", Endpoint::kCompletions);
  EXPECT_EQ(p.max_tokens, 5);
}

TEST(GenerationParams, ChatFallsBackToMaxTokens) {
  EXPECT_EQ(ParseOk(R"({"model":"m","max_tokens":5})", Endpoint::kChatCompletions).max_tokens, 5);
}

TEST(GenerationParams, UnknownFieldsAreIgnored) {
  EXPECT_EQ(ParseOk(R"({"model":"m","frobnicate":{"x":[1,2]},"logit_bias":{}})").model, "m");
}

TEST(GenerationParams, LargestInt64SeedIsAccepted) {
  EXPECT_EQ(ParseOk(R"({"model":"m","seed":9223372036854775807})").seed, INT64_MAX);
}

TEST(GenerationParams, ErrorNamesTheParam) {
  auto r = ParseGenerationParams(boost::json::parse(R"({"model":"m","top_p":0})").as_object(),
                                 Endpoint::kCompletions);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().param, "top_p");
  EXPECT_EQ(r.error().status, 400);
}

}  // namespace
}  // namespace kvroute::api
