#include "api/stream_chunks.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "api/sse_parser.h"

namespace kvroute::api {
namespace {

const ResponseMeta kMeta{.id = "chatcmpl-x", .created = 100, .model = "m"};

std::string S(const boost::json::object& o) { return boost::json::serialize(o); }

TEST(ChatChunks, RoleChunkHasAssistantRoleAndEmptyContent) {
  EXPECT_EQ(S(ChatRoleChunk(kMeta, nullptr)),
            R"({"id":"chatcmpl-x","object":"chat.completion.chunk","created":100,"model":"m",)"
            R"("choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,)"
            R"("finish_reason":null}]})");
}

TEST(ChatChunks, ContentChunkCarriesOnlyContent) {
  EXPECT_EQ(S(ChatContentChunk(kMeta, "Hel", nullptr, nullptr)),
            R"({"id":"chatcmpl-x","object":"chat.completion.chunk","created":100,"model":"m",)"
            R"("choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,)"
            R"("finish_reason":null}]})");
}

TEST(ChatChunks, FinishingChunkCarriesFinishAndStopReason) {
  const Finish f{.reason = "length"};
  const auto j = ChatContentChunk(kMeta, "lo", &f, nullptr);
  const auto& c = j.at("choices").at(0).as_object();
  EXPECT_EQ(c.at("finish_reason").as_string(), "length");
  EXPECT_TRUE(c.at("stop_reason").is_null());
  EXPECT_FALSE(j.contains("usage"));
}

TEST(ChatChunks, ContinuousUsageOnAChunk) {
  const Usage u{.prompt_tokens = 3, .completion_tokens = 1};
  EXPECT_EQ(S(ChatContentChunk(kMeta, "a", nullptr, &u).at("usage").as_object()),
            R"({"prompt_tokens":3,"total_tokens":4,"completion_tokens":1})");
}

TEST(CompletionChunks, EveryFieldIsPresentWithNulls) {
  const ResponseMeta meta{.id = "cmpl-y", .created = 1, .model = "m"};
  EXPECT_EQ(S(CompletionChunk(meta, "tok", nullptr, nullptr)),
            R"({"id":"cmpl-y","object":"text_completion","created":1,"model":"m",)"
            R"("choices":[{"index":0,"text":"tok","logprobs":null,"finish_reason":null,)"
            R"("stop_reason":null,"prompt_token_ids":null,"token_ids":null}],"usage":null})");
}

TEST(UsageChunks, EmptyChoicesAndUsage) {
  EXPECT_EQ(S(UsageChunk(kMeta, Endpoint::kChatCompletions,
                         {.prompt_tokens = 2, .completion_tokens = 5, .cached_tokens = 2})),
            R"({"id":"chatcmpl-x","object":"chat.completion.chunk","created":100,"model":"m",)"
            R"("choices":[],"usage":{"prompt_tokens":2,"total_tokens":7,"completion_tokens":5,)"
            R"("prompt_tokens_details":{"cached_tokens":2}}})");
}

// Parses an encoder's output back into JSON events.
std::vector<SseMessage> Events(const std::string& sse) {
  SseParser parser;
  std::vector<SseMessage> events;
  EXPECT_TRUE(parser.Feed(sse, events));
  EXPECT_FALSE(parser.HasPartialEvent());
  return events;
}

TEST(StreamEncoder, ChatStreamWithoutStreamOptions) {
  StreamEncoder enc(Endpoint::kChatCompletions, kMeta, std::nullopt, 7);
  std::string out = enc.Start();
  out += enc.Delta("He", 1);
  out += enc.End("llo", 2, Finish{.reason = "stop"}, std::nullopt);
  const auto events = Events(out);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(boost::json::parse(events[0].data).at("choices").at(0).at("delta").at("role"),
            "assistant");
  EXPECT_EQ(boost::json::parse(events[1].data).at("choices").at(0).at("delta").at("content"), "He");
  const auto last = boost::json::parse(events[2].data);
  EXPECT_EQ(last.at("choices").at(0).at("delta").at("content"), "llo");
  EXPECT_EQ(last.at("choices").at(0).at("finish_reason"), "stop");
  EXPECT_TRUE(events[3].done);
}

TEST(StreamEncoder, IncludeUsageAddsAFinalUsageChunkBeforeDone) {
  StreamEncoder enc(Endpoint::kChatCompletions, kMeta, StreamOptions{}, 7);
  std::string out = enc.Start() + enc.End("x", 1, Finish{}, 4);
  const auto events = Events(out);
  ASSERT_EQ(events.size(), 4u);
  const auto usage = boost::json::parse(events[2].data);
  EXPECT_TRUE(usage.at("choices").as_array().empty());
  EXPECT_EQ(usage.at("usage").at("prompt_tokens"), 7);
  EXPECT_EQ(usage.at("usage").at("completion_tokens"), 1);
  EXPECT_EQ(usage.at("usage").at("prompt_tokens_details").at("cached_tokens"), 4);
  EXPECT_TRUE(events[3].done);
}

TEST(StreamEncoder, ContinuousUsageOnEveryChunk) {
  StreamEncoder enc(Endpoint::kChatCompletions, kMeta,
                    StreamOptions{.include_usage = false, .continuous_usage_stats = true}, 3);
  const auto events = Events(enc.Start() + enc.Delta("a", 1) + enc.End("b", 2, Finish{}, {}));
  ASSERT_EQ(events.size(), 4u);  // role, delta, last, [DONE]: no final usage chunk
  EXPECT_EQ(boost::json::parse(events[0].data).at("usage").at("completion_tokens"), 0);
  EXPECT_EQ(boost::json::parse(events[1].data).at("usage").at("completion_tokens"), 1);
  EXPECT_EQ(boost::json::parse(events[2].data).at("usage").at("total_tokens"), 5);
}

TEST(StreamEncoder, CompletionStreamHasNoRoleChunk) {
  const ResponseMeta meta{.id = "cmpl-1", .created = 1, .model = "m"};
  StreamEncoder enc(Endpoint::kCompletions, meta, StreamOptions{}, 2);
  EXPECT_EQ(enc.Start(), "");
  const auto events = Events(enc.Delta("a", 1) + enc.End("", 2, Finish{.reason = "length"}, {}));
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(boost::json::parse(events[0].data).at("object"), "text_completion");
  EXPECT_EQ(boost::json::parse(events[1].data).at("choices").at(0).at("finish_reason"), "length");
  EXPECT_EQ(boost::json::parse(events[2].data).at("usage").at("total_tokens"), 4);
  EXPECT_TRUE(events[3].done);
}

TEST(StreamErrorFrames, ErrorEventThenDone) {
  EXPECT_EQ(StreamErrorFrames(ApiError::Internal("engine died")),
            "data: {\"error\":{\"message\":\"engine died\",\"type\":\"server_error\","
            "\"param\":null,\"code\":\"internal_error\"}}\n\ndata: [DONE]\n\n");
}

}  // namespace
}  // namespace kvroute::api
