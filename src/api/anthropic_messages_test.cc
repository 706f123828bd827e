#include "api/anthropic_messages.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "api/sse_parser.h"

namespace kvroute::api {
namespace {

AnthropicRequest ParseOk(std::string_view body) {
  auto r = ParseAnthropicRequest(body);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message + " @" + r.error().param);
  return r ? std::move(*r) : AnthropicRequest{};
}

ApiError ParseErr(std::string_view body) {
  auto r = ParseAnthropicRequest(body);
  EXPECT_FALSE(r.has_value());
  return r ? ApiError{} : r.error();
}

TEST(AnthropicRequest, SystemAndStringMessages) {
  const auto r = ParseOk(
      R"({"model":"claude","max_tokens":64,"system":"be brief",
          "messages":[{"role":"user","content":"hi"}],"stop_sequences":["\n\nHuman:"],
          "temperature":0.2,"top_k":5,"metadata":{"user_id":"u1"},"stream":true})");
  EXPECT_EQ(r.params.model, "claude");
  EXPECT_EQ(r.params.max_tokens, 64);
  EXPECT_TRUE(r.params.stream);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"\n\nHuman:"});
  EXPECT_EQ(r.params.user, "u1");
  EXPECT_EQ(r.top_k, 5);
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_EQ(r.chat.messages[0].role, "system");
  EXPECT_EQ(r.chat.messages[0].content, "be brief");
  EXPECT_EQ(r.chat.messages[1].role, "user");
  EXPECT_TRUE(r.chat.add_generation_prompt);
}

TEST(AnthropicRequest, TextBlocksAreJoined) {
  const auto r = ParseOk(
      R"({"model":"c","max_tokens":1,"system":[{"type":"text","text":"s1"},{"type":"text","text":"s2"}],
          "messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})");
  EXPECT_EQ(r.chat.messages[0].content, "s1\ns2");
  EXPECT_EQ(r.chat.messages[1].content, "a\nb");
}

TEST(AnthropicRequest, ToolUseAndToolResultMapToToolCallsAndToolMessages) {
  const auto r = ParseOk(
      R"({"model":"c","max_tokens":10,"messages":[
          {"role":"user","content":"weather in Paris?"},
          {"role":"assistant","content":[{"type":"text","text":"Checking."},
            {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
          {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",
            "content":[{"type":"text","text":"sunny"}]},{"type":"text","text":"thanks"}]}],
          "tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object"}}]})");
  ASSERT_EQ(r.chat.messages.size(), 4u);
  const auto& a = r.chat.messages[1];
  EXPECT_EQ(a.role, "assistant");
  EXPECT_EQ(a.content, "Checking.");
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].id, "toolu_1");
  EXPECT_EQ(a.tool_calls[0].arguments_json, R"({"city":"Paris"})");
  EXPECT_EQ(r.chat.messages[2].role, "tool");
  EXPECT_EQ(r.chat.messages[2].tool_call_id, "toolu_1");
  EXPECT_EQ(r.chat.messages[2].content, "sunny");
  EXPECT_EQ(r.chat.messages[3].role, "user");
  EXPECT_EQ(r.chat.messages[3].content, "thanks");
  EXPECT_EQ(r.chat.tools_json,
            R"([{"type":"function","function":{"name":"get_weather","description":"d",)"
            R"("parameters":{"type":"object"}}}])");
}

TEST(AnthropicRequest, TrailingAssistantMessageIsContinued) {
  const auto r = ParseOk(
      R"({"model":"c","max_tokens":5,"messages":[{"role":"user","content":"x"},
          {"role":"assistant","content":"The answer is"}]})");
  EXPECT_TRUE(r.chat.continue_final_message);
  EXPECT_FALSE(r.chat.add_generation_prompt);
}

TEST(AnthropicRequest, MaxTokensIsRequired) {
  EXPECT_EQ(ParseErr(R"({"model":"c","messages":[{"role":"user","content":"x"}]})").param,
            "max_tokens");
}

TEST(AnthropicRequest, MaxTokensZeroIsRefused) {
  EXPECT_EQ(
      ParseErr(R"({"model":"c","max_tokens":0,"messages":[{"role":"user","content":"x"}]})").param,
      "max_tokens");
}

TEST(AnthropicRequest, SystemRoleInsideMessagesIsRefused) {
  EXPECT_EQ(ParseErr(R"({"model":"c","max_tokens":1,"messages":[{"role":"system","content":"x"}]})")
                .param,
            "messages[0].role");
}

TEST(AnthropicRequest, ImageBlockIsRefused) {
  EXPECT_EQ(ParseErr(R"({"model":"c","max_tokens":1,"messages":[{"role":"user","content":[
                 {"type":"image","source":{}}]}]})")
                .param,
            "messages[0].content[0].type");
}

TEST(AnthropicRequest, TemperatureAboveOneIsRefused) {
  EXPECT_EQ(ParseErr(R"({"model":"c","max_tokens":1,"temperature":1.5,
                          "messages":[{"role":"user","content":"x"}]})")
                .param,
            "temperature");
}

TEST(AnthropicError, Shape) {
  EXPECT_EQ(boost::json::serialize(AnthropicErrorJson(ApiError::InvalidRequest("bad", "x"))),
            R"({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})");
  EXPECT_EQ(AnthropicErrorType(503), "overloaded_error");
  EXPECT_EQ(AnthropicErrorType(401), "authentication_error");
}

TEST(AnthropicStopReason, Mapping) {
  EXPECT_EQ(AnthropicStopReason(Finish{.reason = "stop"}), "end_turn");
  EXPECT_EQ(AnthropicStopReason(Finish{.reason = "stop", .stop_string = "X"}), "stop_sequence");
  EXPECT_EQ(AnthropicStopReason(Finish{.reason = "length"}), "max_tokens");
  EXPECT_EQ(AnthropicStopReason(Finish{.reason = "tool_calls"}), "tool_use");
}

TEST(AnthropicResponse, FieldByField) {
  const ResponseMeta meta{.id = "msg_1", .created = 0, .model = "c"};
  EXPECT_EQ(boost::json::serialize(AnthropicResponseJson(
                meta, "Hi", Finish{.reason = "length"},
                {.prompt_tokens = 10, .completion_tokens = 3, .cached_tokens = 8})),
            R"({"id":"msg_1","type":"message","role":"assistant","model":"c",)"
            R"("content":[{"type":"text","text":"Hi"}],"stop_reason":"max_tokens",)"
            R"("stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":3,)"
            R"("cache_read_input_tokens":8}})");
}

TEST(AnthropicStream, EventSequence) {
  AnthropicStreamEncoder enc(ResponseMeta{.id = "msg_2", .created = 0, .model = "c"}, 12);
  const std::string sse = enc.Start() + enc.Delta("Hel") + enc.Delta("") + enc.Delta("lo") +
                          enc.End(Finish{.reason = "stop"}, 2);
  SseParser parser;
  std::vector<SseMessage> events;
  ASSERT_TRUE(parser.Feed(sse, events));
  std::vector<std::string> names;
  for (const auto& e : events) {
    names.push_back(e.event);
    // The event name repeats the JSON "type", as Anthropic sends it.
    EXPECT_EQ(boost::json::parse(e.data).at("type").as_string(), e.event);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop", "message_delta",
                                      "message_stop"}));
  const auto start = boost::json::parse(events[0].data);
  EXPECT_EQ(start.at("message").at("usage").at("input_tokens"), 12);
  EXPECT_EQ(boost::json::parse(events[2].data).at("delta").at("text"), "Hel");
  const auto delta = boost::json::parse(events[5].data);
  EXPECT_EQ(delta.at("delta").at("stop_reason"), "end_turn");
  EXPECT_EQ(delta.at("usage").at("output_tokens"), 2);
}

}  // namespace
}  // namespace kvroute::api
