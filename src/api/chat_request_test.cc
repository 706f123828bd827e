#include "api/chat_request.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace kvroute::api {
namespace {

ChatCompletionRequest ParseOk(std::string_view body) {
  auto r = ParseChatCompletionRequest(body);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message + " @" + r.error().param);
  return r ? std::move(*r) : ChatCompletionRequest{};
}

TEST(ChatRequest, StringContentMessages) {
  const auto r = ParseOk(
      R"({"model":"m","messages":[{"role":"system","content":"be brief"},
          {"role":"user","content":"hi"}]})");
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_EQ(r.chat.messages[0].role, "system");
  EXPECT_EQ(r.chat.messages[0].content, "be brief");
  EXPECT_EQ(r.chat.messages[1].role, "user");
  EXPECT_EQ(r.chat.messages[1].content, "hi");
  EXPECT_TRUE(r.chat.add_generation_prompt);
  EXPECT_FALSE(r.chat.continue_final_message);
  EXPECT_TRUE(r.chat.tools_json.empty());
}

TEST(ChatRequest, EveryRoleIsAccepted) {
  const auto r = ParseOk(
      R"({"model":"m","messages":[{"role":"developer","content":"d"},{"role":"system","content":"s"},
          {"role":"user","content":"u"},{"role":"assistant","content":"a"},
          {"role":"tool","content":"t","tool_call_id":"c1"}]})");
  ASSERT_EQ(r.chat.messages.size(), 5u);
  EXPECT_EQ(r.chat.messages[4].tool_call_id, "c1");
}

TEST(ChatRequest, TextPartsAreFlattenedWithNewlines) {
  const auto r = ParseOk(
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},
          {"type":"text","text":"b"}]}]})");
  EXPECT_EQ(r.chat.messages[0].content, "a\nb");
}

TEST(ChatRequest, EmptyPartListIsEmptyContent) {
  const auto r = ParseOk(R"({"model":"m","messages":[{"role":"user","content":[]}]})");
  EXPECT_EQ(r.chat.messages[0].content, "");
}

TEST(ChatRequest, AssistantToolCallsWithNullContent) {
  const auto r = ParseOk(
      R"({"model":"m","messages":[{"role":"user","content":"weather?"},
          {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
           "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
          {"role":"tool","tool_call_id":"call_1","content":"sunny","name":"get_weather"}]})");
  ASSERT_EQ(r.chat.messages.size(), 3u);
  const auto& a = r.chat.messages[1];
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].id, "call_1");
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(a.tool_calls[0].arguments_json, R"({"city":"Paris"})");
  EXPECT_EQ(r.chat.messages[2].name, "get_weather");
}

TEST(ChatRequest, ObjectArgumentsAreKeptAsJsonText) {
  const auto r = ParseOk(
      R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c",
          "function":{"name":"f","arguments":{"x":1}}}]}]})");
  EXPECT_EQ(r.chat.messages[0].tool_calls[0].arguments_json, R"({"x":1})");
}

TEST(ChatRequest, ToolsAreKeptAsJsonText) {
  const auto r = ParseOk(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],
          "tools":[{"type":"function","function":{"name":"f","parameters":{}}}]})");
  EXPECT_EQ(r.chat.tools_json, R"([{"type":"function","function":{"name":"f","parameters":{}}}])");
}

TEST(ChatRequest, ContinueFinalMessageTurnsOffTheGenerationPromptByDefault) {
  const auto r = ParseOk(
      R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"The"}],
          "continue_final_message":true})");
  EXPECT_TRUE(r.chat.continue_final_message);
  EXPECT_FALSE(r.chat.add_generation_prompt);
}

TEST(ChatRequest, AddGenerationPromptCanBeTurnedOff) {
  const auto r = ParseOk(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"add_generation_prompt":false})");
  EXPECT_FALSE(r.chat.add_generation_prompt);
}

TEST(ChatRequest, MaxCompletionTokensWins) {
  const auto r = ParseOk(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":3,
          "max_completion_tokens":30})");
  EXPECT_EQ(r.params.max_tokens, 30);
}

TEST(ChatRequest, KeepsTheOriginalBody) {
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"vendor_ext":{"k":1}})";
  EXPECT_EQ(boost::json::serialize(ParseOk(body).body), body);
}

TEST(ChatRequest, ErrorParamPointsIntoTheMessageList) {
  auto r = ParseChatCompletionRequest(
      R"({"model":"m","messages":[{"role":"user","content":"ok"},
          {"role":"user","content":[{"type":"text","text":"a"},{"type":"input_audio"}]}]})");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().param, "messages[1].content[1].type");
  EXPECT_NE(r.error().message.find("input_audio"), std::string::npos);
}

TEST(ChatRequest, ParseChatFieldsWorksOnATokenizeBody) {
  auto r = ParseChatFields(
      boost::json::parse(R"({"messages":[{"role":"user","content":"x"}]})").as_object());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->messages.size(), 1u);
}

}  // namespace
}  // namespace kvroute::api

namespace kvroute::api {
namespace {

constexpr std::string_view kImageChat = R"({"model":"m","messages":[
    {"role":"user","content":[{"type":"text","text":"What is this?"},
        {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
        {"type":"image_url","image_url":"https://example.com/cat.png","uuid":"my-cat"}]},
    {"role":"assistant","content":"A cat."},
    {"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,BBBB"}}]}]})";

TEST(ChatRequestImages, RefusedUnlessAccepted) {
  auto r = ParseChatCompletionRequest(kImageChat);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().param, "messages[0].content[1].type");
}

TEST(ChatRequestImages, EachImageIsAPlaceholderLineInFrontWithItsIdentifier) {
  auto r = ParseChatCompletionRequest(kImageChat, {.accept = true, .placeholder = "<img>"});
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->chat.messages[0].content, "<img>\n<img>\nWhat is this?");
  EXPECT_EQ(r->chat.messages[2].content, "<img>\n");
  ASSERT_EQ(r->images.size(), 3u);
  EXPECT_EQ(r->images[0].identifier, ImageIdentifier("data:image/png;base64,AAAA"));
  EXPECT_TRUE(r->images[0].identifier.starts_with("kvimg-"));
  EXPECT_EQ(r->images[1].identifier, "my-cat");  // the client's uuid, as vLLM takes it
  EXPECT_TRUE(r->images[1].has_uuid);
  EXPECT_NE(r->images[2].identifier, r->images[0].identifier);
}

TEST(ChatRequestImages, DataUrlsAreNamedByTheirContentAndRemoteOnesByReference) {
  // The media type does not change a data URL's identity; its payload does.
  EXPECT_EQ(ImageIdentifier("data:image/png;base64,AAAA"),
            ImageIdentifier("data:image/jpeg;base64,AAAA"));
  EXPECT_NE(ImageIdentifier("data:image/png;base64,AAAA"),
            ImageIdentifier("data:image/png;base64,AAAB"));
  EXPECT_TRUE(ImageIdentifier("https://example.com/a.png").starts_with("kvurl-"));
  EXPECT_NE(ImageIdentifier("https://example.com/a.png"),
            ImageIdentifier("https://example.com/b.png"));
}

TEST(ChatRequestImages, AnImageWithoutUrlIsA400NamingTheField) {
  auto r = ParseChatCompletionRequest(
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})",
      {.accept = true});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().param, "messages[0].content[0].image_url.url");
}

TEST(ChatRequestImages, AUuidWithoutAnImageIsTheCachedItemItNames) {
  // vLLM's online API: `"image_url": null` with a uuid asks for the item cached under that id.
  auto r = ParseChatCompletionRequest(
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":null,"uuid":"sku-1"}]}]})",
      {.accept = true});
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->images.size(), 1u);
  EXPECT_EQ(r->images[0].identifier, "sku-1");
  auto none = ParseChatCompletionRequest(
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":null}]}]})",
      {.accept = true});
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().param, "messages[0].content[0].image_url.url");
}

TEST(ChatRequestImages, UuidsAreWrittenIntoPartsThatHaveNone) {
  auto r = ParseChatCompletionRequest(kImageChat, {.accept = true});
  ASSERT_TRUE(r.has_value());
  SetImageUuids(&r->body, r->images);
  const auto& m = r->body.at("messages").as_array();
  EXPECT_EQ(m[0].at("content").as_array()[1].at("uuid").as_string(), r->images[0].identifier);
  EXPECT_EQ(m[0].at("content").as_array()[2].at("uuid").as_string(), "my-cat");
  EXPECT_EQ(m[2].at("content").as_array()[0].at("uuid").as_string(), r->images[2].identifier);
  EXPECT_FALSE(m[0].at("content").as_array()[0].as_object().contains("uuid"));
}

}  // namespace
}  // namespace kvroute::api
