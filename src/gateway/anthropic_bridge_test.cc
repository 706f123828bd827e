// Translation of the workers' OpenAI chat answers into the Anthropic Messages API, pure:
// recorded vLLM-shaped bodies and chunk sequences in, Anthropic JSON and events out.
#include "gateway/anthropic_bridge.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <vector>

namespace kvroute::gateway {
namespace {

namespace json = boost::json;

json::object Parse(std::string_view text) { return json::parse(text).as_object(); }

// Runs the translator over chat chunks (each a data payload; "[DONE]" for the sentinel) and
// returns the Anthropic events it wrote, parsed: (event name, data object).
std::vector<std::pair<std::string, json::object>> Translate(const std::vector<std::string>& chunks,
                                                            bool end = true) {
  AnthropicStreamTranslator t("claude-x", 12);
  std::string out;
  for (const auto& c : chunks) {
    api::SseMessage m;
    m.data = c;
    m.done = c == "[DONE]";
    t.OnEvent(m, &out);
  }
  if (end) t.OnEnd(&out);
  api::SseParser parser;
  std::vector<api::SseMessage> events;
  EXPECT_TRUE(parser.Feed(out, events));
  std::vector<std::pair<std::string, json::object>> result;
  for (const auto& e : events) result.emplace_back(e.event, Parse(e.data));
  return result;
}

std::vector<std::string> Names(const std::vector<std::pair<std::string, json::object>>& events) {
  std::vector<std::string> names;
  for (const auto& [name, data] : events) {
    EXPECT_EQ(json::value(name), data.at("type")) << "event name and data type agree";
    names.push_back(name);
  }
  return names;
}

TEST(AnthropicMessageId, ReplacesTheChatPrefix) {
  EXPECT_EQ(AnthropicMessageId("chatcmpl-abc123"), "msg_abc123");
  EXPECT_EQ(AnthropicMessageId("xyz"), "msg_xyz");
}

TEST(AnthropicMessageFromChat, TextAnswerFieldByField) {
  auto out = AnthropicMessageFromChat(
      R"({"id":"chatcmpl-1f","object":"chat.completion","model":"qwen",
          "choices":[{"index":0,"message":{"role":"assistant","content":"Hello!","tool_calls":[]},
                      "finish_reason":"length","stop_reason":null}],
          "usage":{"prompt_tokens":9,"total_tokens":14,"completion_tokens":5,
                   "prompt_tokens_details":{"cached_tokens":8}}})",
      "claude-x");
  ASSERT_TRUE(out.has_value()) << out.error();
  EXPECT_EQ(Parse(*out), Parse(R"({"id":"msg_1f","type":"message","role":"assistant",
      "model":"claude-x","content":[{"type":"text","text":"Hello!"}],"stop_reason":"max_tokens",
      "stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":5,
      "cache_read_input_tokens":8}})"));
}

TEST(AnthropicMessageFromChat, MatchedStopStringIsAStopSequence) {
  auto out = AnthropicMessageFromChat(
      R"({"id":"chatcmpl-2","choices":[{"message":{"content":"a"},"finish_reason":"stop",
          "stop_reason":"END"}],"usage":{"prompt_tokens":1,"completion_tokens":1}})",
      "m");
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(Parse(*out).at("stop_reason"), "stop_sequence");
  EXPECT_EQ(Parse(*out).at("stop_sequence"), "END");
}

TEST(AnthropicMessageFromChat, ToolCallsBecomeToolUseBlocksAndReasoningAThinkingBlock) {
  auto out = AnthropicMessageFromChat(
      R"({"id":"chatcmpl-3","choices":[{"message":{"content":null,"reasoning":"think",
          "tool_calls":[{"id":"call_1","type":"function",
            "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
          "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4}})",
      "m");
  ASSERT_TRUE(out.has_value());
  const auto o = Parse(*out);
  EXPECT_EQ(o.at("stop_reason"), "tool_use");
  EXPECT_EQ(o.at("content"), json::parse(R"([{"type":"thinking","thinking":"think","signature":""},
      {"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}}])"));
}

TEST(AnthropicMessageFromChat, ABodyWithoutChoicesIsAnError) {
  EXPECT_FALSE(AnthropicMessageFromChat(R"({"id":"x"})", "m").has_value());
  EXPECT_FALSE(AnthropicMessageFromChat("not json", "m").has_value());
}

TEST(AnthropicErrorFromUpstream, KeepsTheWorkersMessageAndMapsTheStatus) {
  EXPECT_EQ(Parse(AnthropicErrorFromUpstream(
                400, R"({"error":{"message":"too long","type":"BadRequestError","code":400}})")),
            Parse(R"({"type":"error","error":{"type":"invalid_request_error",
                      "message":"too long"}})"));
  const auto o = Parse(AnthropicErrorFromUpstream(503, "<html>busy</html>"));
  EXPECT_EQ(o.at("error").at("type"), "overloaded_error");
  EXPECT_EQ(o.at("error").at("message"), "the model server answered HTTP 503");
}

// vLLM's chat stream: role chunk, content chunks, the finishing chunk, the usage chunk, [DONE].
TEST(AnthropicStreamTranslator, TextStreamBecomesTheAnthropicEventSequence) {
  auto events = Translate({
      R"({"id":"chatcmpl-9","object":"chat.completion.chunk","model":"q","choices":[{"index":0,
          "delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})",
      R"({"id":"chatcmpl-9","choices":[{"index":0,"delta":{"content":"Hel"}}]})",
      R"({"id":"chatcmpl-9","choices":[{"index":0,"delta":{"content":"lo"},
          "finish_reason":"length","stop_reason":null}]})",
      R"({"id":"chatcmpl-9","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,
          "total_tokens":14}})",
      "[DONE]",
  });
  EXPECT_EQ(Names(events),
            (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop", "message_delta",
                                      "message_stop"}));
  const auto& start = events[0].second.at("message").as_object();
  EXPECT_EQ(start.at("id"), "msg_9");
  EXPECT_EQ(start.at("model"), "claude-x");
  EXPECT_EQ(start.at("usage").at("input_tokens"), 12);
  EXPECT_EQ(events[1].second.at("content_block"), json::parse(R"({"type":"text","text":""})"));
  EXPECT_EQ(events[2].second.at("delta"), json::parse(R"({"type":"text_delta","text":"Hel"})"));
  EXPECT_EQ(events[3].second.at("index"), 0);
  EXPECT_EQ(events[5].second.at("delta").at("stop_reason"), "max_tokens");
  EXPECT_EQ(events[5].second.at("usage"), json::parse(R"({"output_tokens":2,"input_tokens":12})"));
}

TEST(AnthropicStreamTranslator, ToolCallFragmentsBecomeOneToolUseBlockWithJsonDeltas) {
  auto events = Translate({
      R"({"id":"c","choices":[{"delta":{"role":"assistant","content":""}}]})",
      R"({"id":"c","choices":[{"delta":{"content":"Let me check."}}]})",
      R"({"id":"c","choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_7","type":"function",
          "function":{"name":"get_weather","arguments":""}}]}}]})",
      R"({"id":"c","choices":[{"delta":{"tool_calls":[{"index":0,
          "function":{"arguments":"{\"city\":"}}]}}]})",
      R"({"id":"c","choices":[{"delta":{"tool_calls":[{"index":0,
          "function":{"arguments":"\"Paris\"}"}}]},"finish_reason":"tool_calls"}]})",
      "[DONE]",
  });
  EXPECT_EQ(Names(events),
            (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                      "content_block_stop", "content_block_start",
                                      "content_block_delta", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(events[4].second.at("index"), 1);
  EXPECT_EQ(events[4].second.at("content_block"),
            json::parse(R"({"type":"tool_use","id":"call_7","name":"get_weather","input":{}})"));
  EXPECT_EQ(events[6].second.at("delta"),
            json::parse(R"({"type":"input_json_delta","partial_json":"\"Paris\"}"})"));
  EXPECT_EQ(events[8].second.at("delta").at("stop_reason"), "tool_use");
  EXPECT_EQ(events[8].second.at("usage").at("output_tokens"), 1);  // no usage chunk: counted
}

TEST(AnthropicStreamTranslator, ReasoningIsAThinkingBlockClosedWithASignature) {
  auto events = Translate({
      R"({"id":"c","choices":[{"delta":{"reasoning":"hmm"}}]})",
      R"({"id":"c","choices":[{"delta":{"content":"42"},"finish_reason":"stop"}]})",
      "[DONE]",
  });
  EXPECT_EQ(Names(events),
            (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop",
                                      "content_block_start", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(events[2].second.at("delta").at("type"), "thinking_delta");
  EXPECT_EQ(events[3].second.at("delta").at("type"), "signature_delta");
  EXPECT_EQ(events[8].second.at("delta").at("stop_reason"), "end_turn");
}

TEST(AnthropicStreamTranslator, UpstreamEndWithoutDoneStillClosesTheMessage) {
  auto events = Translate({R"({"id":"c","choices":[{"delta":{"content":"x"}}]})"});
  EXPECT_EQ(Names(events).back(), "message_stop");
}

TEST(AnthropicStreamTranslator, UpstreamErrorEventBecomesAnAnthropicErrorAndEndsTheStream) {
  auto events = Translate({
      R"({"id":"c","choices":[{"delta":{"content":"x"}}]})",
      R"({"error":{"message":"engine died","type":"InternalServerError","code":500}})",
      "[DONE]",
  });
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().first, "error");
  EXPECT_EQ(events.back().second.at("error"),
            json::parse(R"({"type":"api_error","message":"engine died"})"));
}

}  // namespace
}  // namespace kvroute::gateway
