// The pure half of stream migration: what is read from a relayed stream, the continuation
// bodies, and the filter of a continuation's events.
#include "gateway/proxy/stream_migration.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvroute::gateway {
namespace {

namespace json = boost::json;
using api::Endpoint;

std::string Event(std::string_view data) { return "data: " + std::string(data) + "\n\n"; }

TEST(StreamedText, CollectsChatContentWithoutTheRoleChunkOrUsage) {
  StreamedText s(Endpoint::kChatCompletions);
  s.Feed(Event(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})"));
  s.Feed(Event(R"({"choices":[{"index":0,"delta":{"content":"Hel"}}]})") +
         Event(R"({"choices":[{"index":0,"delta":{"content":"lo \"x\""}}]})"));
  // An event split across two pieces counts once, when it completes.
  const std::string split = Event(R"({"choices":[{"index":0,"delta":{"content":"!"}}]})");
  s.Feed(split.substr(0, 10));
  EXPECT_TRUE(s.mid_event());
  s.Feed(split.substr(10));
  s.Feed(Event(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}})"));
  EXPECT_EQ(s.text(), "Hello \"x\"!");
  EXPECT_EQ(s.tokens(), 3u);
  EXPECT_TRUE(s.unsupported().empty());
  EXPECT_FALSE(s.mid_event());
}

TEST(StreamedText, CollectsCompletionText) {
  StreamedText s(Endpoint::kCompletions);
  s.Feed(Event(R"({"choices":[{"index":0,"text":"a"}]})") +
         Event(R"({"choices":[{"index":0,"text":"b"}]})"));
  EXPECT_EQ(s.text(), "ab");
  EXPECT_EQ(s.tokens(), 2u);
}

TEST(StreamedText, KeepsEscapesExactOnTheFastPathAndReadsOtherLayoutsByParsing) {
  StreamedText s(Endpoint::kChatCompletions);
  s.Feed(Event(R"({"choices":[{"index":0,"delta":{"content":"a\"b\\c\n\u00e9"}}]})"));
  // Spaces after the colons: not the fast path's layout, still read.
  s.Feed(Event(R"({"choices": [{"index": 0, "delta": {"content": " d"}}]})"));
  EXPECT_EQ(s.text(), "a\"b\\c\n\xc3\xa9 d");
  EXPECT_EQ(s.tokens(), 2u);
}

TEST(StreamedText, ToolCallsAndSeveralChoicesCannotBeContinued) {
  StreamedText tools(Endpoint::kChatCompletions);
  tools.Feed(Event(R"({"choices":[{"delta":{"tool_calls":[{"index":0}]}}]})"));
  EXPECT_NE(tools.unsupported().find("tool_calls"), std::string::npos);
  StreamedText two(Endpoint::kCompletions);
  two.Feed(Event(R"({"choices":[{"index":0,"text":"a"},{"index":1,"text":"b"}]})"));
  EXPECT_FALSE(two.unsupported().empty());
}

TEST(StreamedText, StopsPastItsBound) {
  StreamedText s(Endpoint::kCompletions);
  const std::string big(StreamedText::kMaxTextBytes / 2 + 1, 'x');
  const std::string event = Event(json::serialize(
      json::object{{"choices", json::array{json::object{{"text", big}}}}}));
  s.Feed(event);
  EXPECT_TRUE(s.unsupported().empty());
  s.Feed(event);
  EXPECT_FALSE(s.unsupported().empty());
}

TEST(BuildContinuation, CompletionsAppendTheTextToThePromptAndReduceMaxTokens) {
  Continuation c = BuildContinuation(
      Endpoint::kCompletions,
      R"({"model":"m","prompt":"Once","max_tokens":10,"min_tokens":4,"stream":true})", " upon",
      3);
  ASSERT_EQ(c.kind, Continuation::Kind::kSend) << c.reason;
  json::object body = json::parse(c.body).as_object();
  EXPECT_EQ(body.at("prompt").as_string(), "Once upon");
  EXPECT_EQ(body.at("max_tokens").to_number<int>(), 7);
  EXPECT_EQ(body.at("min_tokens").to_number<int>(), 1);
  EXPECT_TRUE(body.at("stream").as_bool());
}

TEST(BuildContinuation, ChatAddsAnAssistantMessageToContinue) {
  Continuation c = BuildContinuation(
      Endpoint::kChatCompletions,
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":5})",
      "Hel", 2);
  ASSERT_EQ(c.kind, Continuation::Kind::kSend) << c.reason;
  json::object body = json::parse(c.body).as_object();
  const json::array& messages = body.at("messages").as_array();
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[1].at("role").as_string(), "assistant");
  EXPECT_EQ(messages[1].at("content").as_string(), "Hel");
  EXPECT_TRUE(body.at("continue_final_message").as_bool());
  EXPECT_FALSE(body.at("add_generation_prompt").as_bool());
  EXPECT_EQ(body.at("max_completion_tokens").to_number<int>(), 3);
}

TEST(BuildContinuation, ChatThatAlreadyContinuedAnAssistantMessageExtendsIt) {
  Continuation c = BuildContinuation(
      Endpoint::kChatCompletions,
      R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure: "}],)"
      R"("continue_final_message":true,"add_generation_prompt":false,"max_tokens":9})",
      "one", 1);
  ASSERT_EQ(c.kind, Continuation::Kind::kSend) << c.reason;
  const json::value body = json::parse(c.body);
  const json::array& messages = body.at("messages").as_array();
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[1].at("content").as_string(), "Sure: one");
}

TEST(BuildContinuation, ARequestWithAllItsTokensIsComplete) {
  EXPECT_EQ(BuildContinuation(Endpoint::kCompletions, R"({"prompt":"a","max_tokens":3})", "xyz", 3)
                .kind,
            Continuation::Kind::kComplete);
}

TEST(BuildContinuation, TokenPromptsEchoAndSeveralChoicesAreNotContinued) {
  for (const char* body : {R"({"prompt":[1,2,3],"max_tokens":8})",
                           R"({"prompt":"a","echo":true,"max_tokens":8})",
                           R"({"prompt":"a","n":2,"max_tokens":8})", "not json"}) {
    Continuation c = BuildContinuation(Endpoint::kCompletions, body, "x", 1);
    EXPECT_EQ(c.kind, Continuation::Kind::kUnsupported) << body;
    EXPECT_FALSE(c.reason.empty()) << body;
  }
}

TEST(ContinuationRelay, DropsTheRoleChunkAndRewritesUsageToTheOriginalView) {
  ContinuationRelay relay(Endpoint::kChatCompletions, 4);
  std::string out =
      relay.Feed(Event(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""},)"
                       R"("finish_reason":null}]})"));
  EXPECT_EQ(out, "");
  out = relay.Feed(Event(R"({"choices":[{"index":0,"delta":{"content":"x"}}]})"));
  EXPECT_EQ(out, Event(R"({"choices":[{"index":0,"delta":{"content":"x"}}]})"));
  // The continuation's prompt held the 4 streamed tokens; its completion did not.
  out = relay.Feed(
      Event(R"({"choices":[],"usage":{"prompt_tokens":14,"completion_tokens":6,"total_tokens":20}})") +
      "data: [DONE]\n\n");
  ASSERT_EQ(out.rfind("data: [DONE]\n\n"), out.size() - 14) << out;
  json::value usage = json::parse(out.substr(6, out.find("\n\n") - 6)).at("usage");
  EXPECT_EQ(usage.at("prompt_tokens").to_number<int>(), 10);
  EXPECT_EQ(usage.at("completion_tokens").to_number<int>(), 10);
  EXPECT_EQ(usage.at("total_tokens").to_number<int>(), 20);
}

TEST(ContinuationRelay, CompletionEventsPassUnchanged) {
  ContinuationRelay relay(Endpoint::kCompletions, 2);
  const std::string e = Event(R"({"choices":[{"index":0,"text":"q"}]})");
  EXPECT_EQ(relay.Feed(e.substr(0, 7)), "");
  EXPECT_EQ(relay.Feed(e.substr(7)), e);
}

}  // namespace
}  // namespace kvroute::gateway
