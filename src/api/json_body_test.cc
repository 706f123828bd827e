// The fast JSON path must build exactly what Boost.JSON parses, and decline (leaving the
// body to Boost.JSON) everything invalid, so that errors stay Boost.JSON's.
#include "api/json_body.h"

#include <gtest/gtest.h>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <random>
#include <string>
#include <vector>

#include "api/anthropic_messages.h"
#include "api/chat_request.h"
#include "api/completion_request.h"

namespace kvroute::api {
namespace {

namespace json = boost::json;

json::value BoostParse(std::string_view text) {
  return json::parse(json::string_view(text.data(), text.size()));
}

std::optional<json::value> Fast(std::string_view text) { return detail::ParseJsonFast(text, {}); }

// Valid documents the fast path must handle itself, each equal to Boost.JSON's value.
const std::vector<std::string> kValid = {
    R"({})",
    R"([])",
    R"( { "a" : [ 1 , -2 , 3.5 , 1e3 , -0 , 0.0 , 18446744073709551615 , 1e400 ] } )",
    R"({"model":"qwen3","messages":[{"role":"user","content":"hi"}],"stream":true})",
    R"({"t":true,"f":false,"n":null,"nested":{"x":{"y":[[],{}]}}})",
    R"({"esc":"a\"b\\c\/d\be\ff\ng\rh\ti"})",
    R"({"u":"\u0041\u00e9\u4e2d\ud83d\ude00 and \u0000 nul"})",
    "{\"utf8\":\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\"}",
    "{\"key with \\n escape\":1,\"k\xc3\xa9y\":2}",
    "\t\r\n{\"ws\":\r\n[1,\t2]}\n",
};

TEST(JsonFastParse, BuildsTheSameValueAsBoostJson) {
  for (const std::string& text : kValid) {
    auto fast = Fast(text);
    ASSERT_TRUE(fast.has_value()) << text;
    EXPECT_EQ(*fast, BoostParse(text)) << text;
  }
}

TEST(JsonFastParse, KeepsNumberKindsOfBoostJson) {
  auto fast = Fast(R"([1,-1,18446744073709551615,2.5])");
  ASSERT_TRUE(fast.has_value());
  const json::array& a = fast->as_array();
  EXPECT_TRUE(a[0].is_int64());
  EXPECT_TRUE(a[1].is_int64());
  EXPECT_TRUE(a[2].is_uint64());
  EXPECT_TRUE(a[3].is_double());
}

TEST(JsonFastParse, HandlesLongStringsAcrossTheVectorScan) {
  // Escapes, non-ASCII and the closing quote at every offset modulo 16.
  for (int pad = 0; pad < 40; ++pad) {
    std::string content(static_cast<std::size_t>(pad), 'x');
    content += "line\\nnext \xc3\xa9\\t";
    content += std::string(static_cast<std::size_t>(pad) * 3, 'y');
    const std::string text = "{\"content\":\"" + content + "\"}";
    auto fast = Fast(text);
    ASSERT_TRUE(fast.has_value()) << pad;
    EXPECT_EQ(*fast, BoostParse(text)) << pad;
  }
}

TEST(JsonFastParse, DeclinesInvalidDocuments) {
  const std::vector<std::string> invalid = {
      "",
      "{",
      R"({"a":1,})",
      R"([1,])",
      R"({"a" 1})",
      R"({a:1})",
      R"({"a":01})",
      R"({"a":+1})",
      R"({"a":1.})",
      R"({"a":tru})",
      R"({"a":1} x)",
      R"({"a":"unterminated)",
      "{\"a\":\"raw\ncontrol\"}",
      R"({"a":"\x"})",
      R"({"a":"\u12G4"})",
      R"({"a":"\ud800"})",
      R"({"a":"\udc00\ud800"})",
      "{\"a\":\"\xc0\xaf\"}",          // overlong
      "{\"a\":\"\xed\xa0\x80\"}",      // surrogate in UTF-8
      "{\"a\":\"\xf4\x90\x80\x80\"}",  // above U+10FFFF
      "{\"a\":\"\xe4\xb8\"}",          // truncated sequence
      "{\"a\":\"\xff\"}",
      R"({"a":1 /* comment */})",
  };
  for (const std::string& text : invalid) EXPECT_FALSE(Fast(text).has_value()) << text;
}

TEST(JsonFastParse, LeavesDuplicateKeysAndDeepNestingToBoostJson) {
  EXPECT_FALSE(Fast(R"({"a":1,"a":2})").has_value());
  const std::string deep = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_FALSE(Fast(deep).has_value());
}

// Random byte edits of valid bodies: whenever the fast path accepts, Boost.JSON accepts the
// same text and builds the same value (the fast path is never more lenient).
TEST(JsonFastParse, NeverAcceptsWhatBoostJsonRejects) {
  const std::string kAlphabet =
      "{}[]\",:\\/ntrfu0123456789.eE+-abcdefABCDEF \t\n\x01\x7f\xc3\xa9\xed\xff";
  std::mt19937 rng(12345);
  int accepted = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string text = kValid[rng() % kValid.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const std::size_t at = rng() % text.size();
      const char c = kAlphabet[rng() % kAlphabet.size()];
      switch (rng() % 3) {
        case 0:
          text[at] = c;
          break;
        case 1:
          text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        default:
          text.erase(at, 1);
      }
    }
    auto fast = Fast(text);
    if (!fast) continue;
    ++accepted;
    boost::system::error_code ec;
    json::value boost_value = json::parse(json::string_view(text), ec);
    ASSERT_FALSE(ec) << text;
    EXPECT_EQ(*fast, boost_value) << text;
  }
  EXPECT_GT(accepted, 100);  // the edits left many documents valid: the check did run
}

TEST(ParseJsonObjectBody, DuplicateKeysStillParseAsBoostJsonDoes) {
  auto obj = ParseJsonObjectBody(R"({"a":1,"a":2})");
  ASSERT_TRUE(obj.has_value());
  EXPECT_EQ(json::value(*obj), BoostParse(R"({"a":1,"a":2})"));
}

TEST(ParseJsonObjectBody, ErrorsAreBoostJsonsMessages) {
  for (std::string_view text : {"{\"a\":1,}", "{\"a\":\"\xff\"}", "[1]"}) {
    auto obj = ParseJsonObjectBody(text);
    ASSERT_FALSE(obj.has_value()) << text;
    EXPECT_EQ(obj.error().status, 400);
  }
  auto trailing = ParseJsonObjectBody("{\"a\":1,}");
  boost::system::error_code ec;
  json::parse(json::string_view("{\"a\":1,}"), ec);
  ASSERT_TRUE(ec);
  EXPECT_EQ(trailing.error().message, "The request body is not valid JSON: " + ec.message() + ".");
}

TEST(ParseJsonObjectBody, TheObjectOwnsAnArenaOfItsOwn) {
  auto obj = ParseJsonObjectBody(R"({"messages":[{"content":"kept\nalive"}]})");
  ASSERT_TRUE(obj.has_value());
  EXPECT_NE(obj->storage().get(), json::storage_ptr().get());
  EXPECT_EQ(obj->at("messages").as_array()[0].at("content").as_string(), "kept\nalive");
}

TEST(ParseJsonObjectBody, AChatRequestKeepsTheParsedBodyWithoutCopyingIt) {
  auto request =
      ParseChatCompletionRequest(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(request.has_value());
  // A copy would have landed in the default storage.
  EXPECT_NE(request->body.storage().get(), json::storage_ptr().get());
  EXPECT_EQ(request->chat.messages[0].content, "hi");
}

TEST(ParseJsonObjectBody, ACompletionRequestKeepsTheParsedBodyWithoutCopyingIt) {
  auto request = ParseCompletionRequest(R"({"model":"m","prompt":"hi"})");
  ASSERT_TRUE(request.has_value());
  EXPECT_NE(request->body.storage().get(), json::storage_ptr().get());
  EXPECT_EQ(request->body.at("prompt").as_string(), "hi");
}

TEST(ParseJsonObjectBody, AnAnthropicRequestKeepsTheParsedBodyWithoutCopyingIt) {
  auto request = ParseAnthropicRequest(
      R"({"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(request.has_value());
  EXPECT_NE(request->body.storage().get(), json::storage_ptr().get());
  EXPECT_EQ(request->body.at("max_tokens").as_int64(), 8);
  EXPECT_EQ(request->chat.messages[0].content, "hi");
}

}  // namespace
}  // namespace kvroute::api
