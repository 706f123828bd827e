#include "api/anthropic_messages.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "api/chat_request.h"
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

TEST(AnthropicRequest, SystemBlocksAreConcatenatedAndUserBlocksJoinedWithNewline) {
  const auto r = ParseOk(
      R"({"model":"c","max_tokens":1,"system":[{"type":"text","text":"s1"},{"type":"text","text":"s2"}],
          "messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})");
  EXPECT_EQ(r.chat.messages[0].content, "s1s2");  // vLLM's Messages endpoint: no separator
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

TEST(AnthropicRequest, BillingHeaderSystemBlockIsSkipped) {
  const auto r = ParseOk(
      R"({"model":"c","max_tokens":1,"system":[{"type":"text","text":"x-anthropic-billing-header: h=1"},
          {"type":"text","text":"You are helpful."}],"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(r.chat.messages[0].content, "You are helpful.");
}

TEST(AnthropicRequest, ToolChoiceBecomesOpenAiToolChoice) {
  auto with = [](std::string_view choice) {
    return ParseOk(std::string(R"({"model":"c","max_tokens":1,"tool_choice":)") +
                   std::string(choice) + R"(,"messages":[{"role":"user","content":"x"}]})")
        .tool_choice;
  };
  EXPECT_EQ(with(R"({"type":"any"})"), boost::json::value("required"));
  EXPECT_EQ(with(R"({"type":"auto"})"), boost::json::value("auto"));
  EXPECT_EQ(with(R"({"type":"tool","name":"f"})"),
            boost::json::parse(R"({"type":"function","function":{"name":"f"}})"));
  EXPECT_EQ(ParseErr(R"({"model":"c","max_tokens":1,"tool_choice":{"type":"maybe"},
                         "messages":[{"role":"user","content":"x"}]})")
                .param,
            "tool_choice.type");
}

// What kvroute forwards must render to the very chat it tokenized for routing: parsing the
// forwarded body as a /v1/chat/completions request gives the same messages and flags.
TEST(AnthropicChatBody, ParsesBackToTheChatKvrouteTokenized) {
  const auto r = ParseOk(
      R"({"model":"c","max_tokens":10,"system":"sys","messages":[
          {"role":"user","content":"weather in Paris?"},
          {"role":"assistant","content":[
            {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
          {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",
            "content":"sunny"},{"type":"text","text":"thanks"}]},
          {"role":"assistant","content":"It is"}],
          "tools":[{"name":"get_weather","input_schema":{"type":"object"}}]})");
  auto chat = ParseChatCompletionRequest(OpenAiChatBody(r));
  ASSERT_TRUE(chat.has_value()) << chat.error().message << " @" << chat.error().param;
  const auto& a = r.chat;
  const auto& b = chat->chat;
  ASSERT_EQ(a.messages.size(), b.messages.size());
  for (std::size_t i = 0; i < a.messages.size(); ++i) {
    EXPECT_EQ(a.messages[i].role, b.messages[i].role) << i;
    EXPECT_EQ(a.messages[i].content, b.messages[i].content) << i;
    EXPECT_EQ(a.messages[i].tool_call_id, b.messages[i].tool_call_id) << i;
    ASSERT_EQ(a.messages[i].tool_calls.size(), b.messages[i].tool_calls.size()) << i;
    for (std::size_t k = 0; k < a.messages[i].tool_calls.size(); ++k) {
      EXPECT_EQ(a.messages[i].tool_calls[k].id, b.messages[i].tool_calls[k].id);
      EXPECT_EQ(a.messages[i].tool_calls[k].name, b.messages[i].tool_calls[k].name);
      EXPECT_EQ(a.messages[i].tool_calls[k].arguments_json,
                b.messages[i].tool_calls[k].arguments_json);
    }
  }
  EXPECT_EQ(boost::json::parse(a.tools_json), boost::json::parse(b.tools_json));
  EXPECT_EQ(a.add_generation_prompt, b.add_generation_prompt);
  EXPECT_EQ(a.continue_final_message, b.continue_final_message);
  EXPECT_TRUE(b.continue_final_message);
}

TEST(AnthropicChatBody, CarriesSamplingParamsAndAsksForUsageWhenStreaming) {
  const auto r = ParseOk(
      R"({"model":"c","max_tokens":7,"stream":true,"stop_sequences":["END"],"temperature":0.5,
          "top_p":0.9,"top_k":40,"metadata":{"user_id":"u1"},
          "messages":[{"role":"user","content":"x"}]})");
  const auto body = boost::json::parse(OpenAiChatBody(r)).as_object();
  EXPECT_EQ(body.at("model"), "c");
  EXPECT_EQ(body.at("max_tokens"), 7);
  EXPECT_EQ(body.at("stop"), boost::json::parse(R"(["END"])"));
  EXPECT_EQ(body.at("temperature"), 0.5);
  EXPECT_EQ(body.at("top_p"), 0.9);
  EXPECT_EQ(body.at("top_k"), 40);
  EXPECT_EQ(body.at("user"), "u1");
  EXPECT_EQ(body.at("stream"), true);
  EXPECT_EQ(body.at("stream_options"), boost::json::parse(R"({"include_usage":true})"));
  EXPECT_FALSE(body.contains("tool_choice"));
  EXPECT_FALSE(body.contains("continue_final_message"));
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
