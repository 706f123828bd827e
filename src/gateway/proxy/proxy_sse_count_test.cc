// SseTokenCounter: the relay's token count, checked against rules and against api::SseParser
// (the parser the relay used before) on the same bytes split at every position.
#include "gateway/proxy/proxy_sse_count.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/sse_parser.h"

namespace kvroute::gateway {
namespace {

constexpr const char* kToken = "data: {\"choices\":[{\"text\":\"t\"}]}\n\n";

SseTokenCounter::Counts CountAll(std::string_view bytes) {
  SseTokenCounter counter;
  return counter.Feed(bytes);
}

// What the relay counted with api::SseParser.
SseTokenCounter::Counts CountWithParser(const std::vector<std::string_view>& pieces) {
  api::SseParser parser;
  SseTokenCounter::Counts counts;
  std::vector<api::SseMessage> events;
  for (std::string_view piece : pieces) {
    events.clear();
    if (!parser.Feed(piece, events)) break;
    for (const auto& e : events) {
      if (e.done) continue;
      if (e.data.starts_with("{\"error\"")) {
        counts.error = true;
        continue;
      }
      if (e.data.find("\"choices\":[]") != std::string::npos) continue;
      ++counts.tokens;
    }
  }
  return counts;
}

TEST(SseTokenCounter, CountsOneTokenPerChoiceEvent) {
  const std::string s = std::string(kToken) + kToken + kToken;
  EXPECT_EQ(CountAll(s).tokens, 3u);
}

TEST(SseTokenCounter, DoneUsageOnlyAndCommentsAreNotTokens) {
  const std::string s = std::string(": ping\n\n") + kToken +
                        "data: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\n" +
                        "data: [DONE]\n\n";
  const auto c = CountAll(s);
  EXPECT_EQ(c.tokens, 1u);
  EXPECT_FALSE(c.error);
}

TEST(SseTokenCounter, OnlyAnEmptyChoicesArrayMakesAUsageOnlyChunk) {
  EXPECT_EQ(CountAll("data: {\"choices\":[],\"usage\":{}}\n\n").tokens, 0u);
  EXPECT_EQ(CountAll("data: [\"choices\":[]]\n\n").tokens, 0u);  // after another '['
  EXPECT_EQ(CountAll("data: {\"x\":[],\"choices\":[{}]}\n\n").tokens, 1u);
  EXPECT_EQ(CountAll("data: {\"choices\":[ ]}\n\n").tokens, 1u);  // not the exact bytes
  EXPECT_EQ(CountAll("data: []\n\n").tokens, 1u);
  EXPECT_EQ(CountAll("data: {\"choices\":[\n\n").tokens, 1u);
}

TEST(SseTokenCounter, AnErrorEventIsFlaggedAndNotCounted) {
  const auto c = CountAll("data: {\"error\":{\"message\":\"x\"}}\n\n");
  EXPECT_EQ(c.tokens, 0u);
  EXPECT_TRUE(c.error);
}

TEST(SseTokenCounter, AnEventIsCountedOnlyWhenItsBlankLineArrives) {
  SseTokenCounter counter;
  EXPECT_EQ(counter.Feed("data: {\"choices\":[{\"text\":\"t\"}]}\n").tokens, 0u);
  EXPECT_EQ(counter.Feed("\n").tokens, 1u);
}

TEST(SseTokenCounter, CrLfSplitAcrossPiecesIsOneLineEnd) {
  SseTokenCounter counter;
  EXPECT_EQ(counter.Feed("data: {\"choices\":[{\"text\":\"t\"}]}\r").tokens, 0u);
  // "\n" completes the "\r" line end; the next "\r\n" is the blank line.
  EXPECT_EQ(counter.Feed("\n\r\n").tokens, 1u);
}

TEST(SseTokenCounter, ALineLongerThanTheBoundStopsCounting) {
  SseTokenCounter counter;
  const std::string huge(SseTokenCounter::kMaxLineBytes + 1, 'x');
  EXPECT_EQ(counter.Feed("data: " + huge).tokens, 0u);
  EXPECT_EQ(counter.Feed(std::string("\n\n") + kToken).tokens, 0u);
}

TEST(SseTokenCounter, AgreesWithSseParserAtEverySplitPoint) {
  const std::string s =
      std::string(": keep-alive\r\n\r\n") + kToken +
      "event: x\r\ndata: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\n" +
      "data: {\"choices\":[{\"text\":\"b\"}]}\r\rdata:{\"choices\":[{\"text\":\"c\"}]}\n\n" +
      "data\ndata: [DONE]\n\n" + "datax: ignored\n\n" + "data: {\"choices\":[],\"usage\":{}}\n\n" +
      "data: {\"error\":{\"code\":500}}\n\n" + "data: [DONE]\n\n";
  const auto whole = CountWithParser({s});
  EXPECT_EQ(whole.tokens, 5u);  // kToken, a, b, c, and "data\ndata: [DONE]" (not [DONE] joined)
  for (std::size_t cut = 0; cut <= s.size(); ++cut) {
    const std::string_view all(s);
    const std::vector<std::string_view> pieces = {all.substr(0, cut), all.substr(cut)};
    SseTokenCounter counter;
    SseTokenCounter::Counts got;
    for (std::string_view p : pieces) {
      const auto c = counter.Feed(p);
      got.tokens += c.tokens;
      got.error = got.error || c.error;
    }
    const auto want = CountWithParser(pieces);
    ASSERT_EQ(got.tokens, want.tokens) << "cut at " << cut;
    ASSERT_EQ(got.error, want.error) << "cut at " << cut;
  }
}

}  // namespace
}  // namespace kvroute::gateway
