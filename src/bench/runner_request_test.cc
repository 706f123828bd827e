#include "bench/runner_request.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvroute::bench {
namespace {
namespace json = boost::json;

TEST(ChatRequestBody, StreamsWithUsageIgnoreEosAndMaxTokens) {
  std::vector<Message> msgs{{"system", "sys"}, {"user", "hi \"there\""}};
  json::object o = json::parse(ChatRequestBody("m1", msgs, 42)).as_object();
  EXPECT_EQ(o.at("model").as_string(), "m1");
  EXPECT_TRUE(o.at("stream").as_bool());
  EXPECT_TRUE(o.at("stream_options").as_object().at("include_usage").as_bool());
  EXPECT_TRUE(o.at("ignore_eos").as_bool());
  EXPECT_EQ(o.at("max_tokens").as_int64(), 42);
  const json::array& m = o.at("messages").as_array();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].as_object().at("role").as_string(), "user");
  EXPECT_EQ(m[1].as_object().at("content").as_string(), "hi \"there\"");
}

TEST(CompletionRequestBody, CarriesTokenIdsAsPrompt) {
  std::vector<TokenId> ids{5, 17, 99};
  json::object o = json::parse(CompletionRequestBody("m", ids, 3)).as_object();
  const json::array& p = o.at("prompt").as_array();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[2].to_number<std::uint32_t>(), 99u);
  EXPECT_TRUE(o.at("stream").as_bool());
}

std::string Content(std::string_view text) {
  return R"({"choices":[{"index":0,"delta":{"content":")" + std::string(text) +
         R"("},"finish_reason":null}]})";
}

TEST(StreamAccounting, TtftIsTheFirstContentChunkNotTheRoleChunk) {
  StreamAccounting acc(10.0);
  ASSERT_TRUE(acc.OnEvent(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})", 10.1));
  ASSERT_TRUE(acc.OnEvent(Content("a"), 10.5));
  ASSERT_TRUE(acc.OnEvent(Content("b"), 10.7));
  ASSERT_TRUE(acc.OnEvent(Content("c"), 11.0));
  acc.OnDone(11.0);
  workload::RequestResult r = acc.Finish(11.2);
  EXPECT_TRUE(r.ok);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.5);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], 0.2, 1e-9);
  EXPECT_NEAR(r.itl_s[1], 0.3, 1e-9);
  EXPECT_NEAR(r.e2e_s, 1.2, 1e-9);
  EXPECT_EQ(acc.reply(), "abc");
  EXPECT_EQ(r.output_tokens, 3u);  // no usage: one chunk per token
}

TEST(StreamAccounting, UsageChunkGivesTokenCountsAndCachedTokens) {
  StreamAccounting acc(0);
  ASSERT_TRUE(acc.OnEvent(Content("x"), 1));
  ASSERT_TRUE(acc.OnEvent(
      R"({"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"total_tokens":107,)"
      R"("prompt_tokens_details":{"cached_tokens":64}}})",
      2));
  acc.OnDone(2);
  workload::RequestResult r = acc.Finish(2);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.prompt_tokens, 100u);
  EXPECT_EQ(r.output_tokens, 7u);
  EXPECT_EQ(r.cached_tokens, 64u);
}

TEST(StreamAccounting, CompletionTextChunksCount) {
  StreamAccounting acc(0);
  ASSERT_TRUE(acc.OnEvent(R"({"choices":[{"index":0,"text":"tok"}]})", 1));
  ASSERT_TRUE(acc.OnEvent(R"({"choices":[{"index":0,"text":"en"}]})", 1.5));
  acc.OnDone(1.5);
  workload::RequestResult r = acc.Finish(1.5);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(acc.reply(), "token");
  EXPECT_EQ(acc.content_chunks(), 2u);
}

TEST(StreamAccounting, StreamWithoutDoneIsAStreamError) {
  StreamAccounting acc(0);
  ASSERT_TRUE(acc.OnEvent(Content("x"), 1));
  workload::RequestResult r = acc.Finish(2);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error_kind, "stream");
}

TEST(StreamAccounting, ErrorEventFailsTheRequest) {
  StreamAccounting acc(0);
  EXPECT_FALSE(acc.OnEvent(R"({"error":{"message":"boom","code":500}})", 1));
  acc.OnDone(1);
  EXPECT_EQ(acc.Finish(1).error_kind, "stream");
}

TEST(StreamAccounting, BadJsonFailsTheRequest) {
  StreamAccounting acc(0);
  EXPECT_FALSE(acc.OnEvent("{not json", 1));
}

TEST(StreamAccounting, TransportErrorKindWins) {
  StreamAccounting acc(0);
  ASSERT_TRUE(acc.OnEvent(Content("x"), 1));
  workload::RequestResult r = acc.Finish(2, "idle_timeout");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error_kind, "idle_timeout");
}

}  // namespace
}  // namespace kvroute::bench
