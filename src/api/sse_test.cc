#include <gtest/gtest.h>

#include <random>

#include "api/sse_parser.h"
#include "api/sse_writer.h"

namespace kvroute::api {
namespace {

std::vector<SseMessage> FeedAll(std::string_view bytes) {
  SseParser p;
  std::vector<SseMessage> out;
  EXPECT_TRUE(p.Feed(bytes, out));
  return out;
}

TEST(SseWriter, DataFrame) { EXPECT_EQ(SseEvent(R"({"a":1})"), "data: {\"a\":1}\n\n"); }

TEST(SseWriter, DoneSentinel) { EXPECT_EQ(kSseDone, "data: [DONE]\n\n"); }

TEST(SseWriter, NamedEvent) {
  EXPECT_EQ(SseEvent("{}", "message_start"), "event: message_start\ndata: {}\n\n");
}

TEST(SseWriter, MultiLinePayloadBecomesSeveralDataLines) {
  EXPECT_EQ(SseEvent("a\nb"), "data: a\ndata: b\n\n");
}

TEST(SseWriter, JsonWithNewlineInAStringStaysOneLine) {
  boost::json::object o{{"t", "x\ny"}};
  EXPECT_EQ(SseJson(o), "data: {\"t\":\"x\\ny\"}\n\n");
}

TEST(SseParser, OneEvent) {
  const auto ev = FeedAll("data: hello\n\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "hello");
  EXPECT_FALSE(ev[0].done);
}

TEST(SseParser, DoneSentinelIsFlagged) {
  const auto ev = FeedAll("data: [DONE]\n\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(ev[0].done);
}

TEST(SseParser, MultiLineDataIsJoinedWithNewline) {
  const auto ev = FeedAll("data: a\ndata: b\n\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "a\nb");
}

TEST(SseParser, CrLfAndLoneCrLineEnds) {
  const auto ev = FeedAll("data: a\r\n\r\ndata: b\r\rdata: c\n\n");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].data, "a");
  EXPECT_EQ(ev[1].data, "b");
  EXPECT_EQ(ev[2].data, "c");
}

// The line end is the nearer of the two bytes: a '\n' before a later '\r' ends its line.
TEST(SseParser, LfBeforeALaterCrEndsTheLineAtTheLf) {
  const auto ev = FeedAll("data: a\ndata: b\r\n\r\ndata: c\r\n\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].data, "a\nb");
  EXPECT_EQ(ev[1].data, "c");
}

TEST(SseParser, CommentsAreSkipped) {
  const auto ev = FeedAll(": keep-alive\n\ndata: x\n: inside\n\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "x");
}

TEST(SseParser, EventNameAndIdAreRecorded) {
  const auto ev = FeedAll("event: message_delta\nid: 7\ndata: {}\n\ndata: z\n\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].event, "message_delta");
  EXPECT_EQ(ev[0].id, "7");
  EXPECT_EQ(ev[1].event, "");  // the event name resets per event
  EXPECT_EQ(ev[1].id, "7");    // the last event id persists
}

TEST(SseParser, NoSpaceAfterColonAndOnlyOneSpaceStripped) {
  const auto ev = FeedAll("data:a\n\ndata:  b\n\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].data, "a");
  EXPECT_EQ(ev[1].data, " b");
}

TEST(SseParser, EventWithoutDataIsDropped) { EXPECT_TRUE(FeedAll("event: ping\n\n").empty()); }

TEST(SseParser, EmptyDataLineMakesAnEventWithEmptyData) {
  const auto ev = FeedAll("data\n\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "");
}

TEST(SseParser, UnterminatedEventIsHeldAndReported) {
  SseParser p;
  std::vector<SseMessage> out;
  ASSERT_TRUE(p.Feed("data: partial\n", out));
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(p.HasPartialEvent());
  ASSERT_TRUE(p.Feed("\n", out));
  EXPECT_EQ(out.size(), 1u);
  EXPECT_FALSE(p.HasPartialEvent());
}

TEST(SseParser, OversizedEventIsAStickyError) {
  SseParser p(16);
  std::vector<SseMessage> out;
  auto r = p.Feed("data: 0123456789abcdef0123\n\n", out);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), SseError::kEventTooLarge);
  EXPECT_FALSE(p.Feed("data: x\n\n", out));
  EXPECT_TRUE(out.empty());
}

TEST(SseParser, ManySmallEventsDoNotTripTheBound) {
  SseParser p(32);
  std::vector<SseMessage> out;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(p.Feed("data: 0123456789\n\n", out));
  EXPECT_EQ(out.size(), 100u);
}

// A stream as vLLM sends it, plus the line-ending and comment variants a proxy may introduce.
const std::string kStream =
    ": ping\r\n\r\n"
    "data: {\"id\":\"1\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{\"content\":\"h\\u00e9\"}}]}\r\n\r\n"
    "event: x\rdata: line1\rdata: line2\r\r"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n"
    "data: [DONE]\n\n";

TEST(SseParser, ByteByByteEqualsWhole) {
  const auto whole = FeedAll(kStream);
  ASSERT_EQ(whole.size(), 5u);
  SseParser p;
  std::vector<SseMessage> pieces;
  for (char c : kStream) ASSERT_TRUE(p.Feed(std::string_view(&c, 1), pieces));
  EXPECT_EQ(pieces, whole);
  EXPECT_TRUE(pieces.back().done);
  EXPECT_EQ(whole[2].data, "line1\nline2");
  EXPECT_EQ(whole[2].event, "x");
}

TEST(SseParser, RandomSplitsEqualWhole) {
  const auto whole = FeedAll(kStream);
  std::mt19937 rng(12345);  // fixed seed: reproducible splits
  for (int trial = 0; trial < 200; ++trial) {
    SseParser p;
    std::vector<SseMessage> pieces;
    std::size_t pos = 0;
    while (pos < kStream.size()) {
      const std::size_t n = std::uniform_int_distribution<std::size_t>(1, 12)(rng);
      const std::size_t take = std::min(n, kStream.size() - pos);
      ASSERT_TRUE(p.Feed(std::string_view(kStream).substr(pos, take), pieces));
      pos += take;
    }
    ASSERT_EQ(pieces, whole) << "trial " << trial;
  }
}

TEST(SseParser, CrAtPieceEndFollowedByLfIsOneLineEnd) {
  SseParser p;
  std::vector<SseMessage> out;
  ASSERT_TRUE(p.Feed("data: a\r", out));
  ASSERT_TRUE(p.Feed("\n\r", out));
  ASSERT_TRUE(p.Feed("\n", out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, "a");
}

TEST(SseRoundTrip, WriterOutputParsesBack) {
  const std::string payload = "first\nsecond";
  const auto ev = FeedAll(SseEvent(payload, "e") + std::string(kSseDone));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].data, payload);
  EXPECT_EQ(ev[0].event, "e");
  EXPECT_TRUE(ev[1].done);
}

}  // namespace
}  // namespace kvroute::api
