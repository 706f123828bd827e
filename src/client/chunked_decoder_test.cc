// ChunkedDecoder: whole bodies, bodies split at every byte, extensions and trailers skipped,
// bytes after the body left alone, malformed framing rejected.
#include "client/chunked_decoder.h"

#include <gtest/gtest.h>

#include <string>

namespace kvroute::client {
namespace {

constexpr std::string_view kBody =
    "5\r\nhello\r\n"
    "1a;name=value\r\nabcdefghijklmnopqrstuvwxyz\r\n"
    "0\r\n\r\n";
constexpr std::string_view kDecoded = "helloabcdefghijklmnopqrstuvwxyz";

TEST(ChunkedDecoderTest, DecodesAWholeBodyInOneFeed) {
  ChunkedDecoder d;
  std::string out;
  auto r = d.Feed(kBody, &out);
  EXPECT_EQ(r.status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(r.used, kBody.size());
  EXPECT_EQ(out, kDecoded);
  EXPECT_TRUE(d.done());
}

TEST(ChunkedDecoderTest, GivesTheSameBytesWhenTheBodyIsSplitAtEveryPosition) {
  for (std::size_t cut = 0; cut <= kBody.size(); ++cut) {
    ChunkedDecoder d;
    std::string out;
    auto first = d.Feed(kBody.substr(0, cut), &out);
    ASSERT_EQ(first.used, cut) << "cut " << cut;
    auto second = d.Feed(kBody.substr(cut), &out);
    EXPECT_EQ(second.status, ChunkedDecoder::Status::kDone) << "cut " << cut;
    EXPECT_EQ(out, kDecoded) << "cut " << cut;
  }
}

TEST(ChunkedDecoderTest, FedOneByteAtATimeNeedsMoreUntilTheFinalCrlf) {
  ChunkedDecoder d;
  std::string out;
  for (std::size_t i = 0; i < kBody.size(); ++i) {
    auto r = d.Feed(kBody.substr(i, 1), &out);
    ASSERT_EQ(r.used, 1u) << i;
    const auto want =
        i + 1 == kBody.size() ? ChunkedDecoder::Status::kDone : ChunkedDecoder::Status::kNeedMore;
    ASSERT_EQ(r.status, want) << i;
  }
  EXPECT_EQ(out, kDecoded);
}

TEST(ChunkedDecoderTest, SkipsTrailerFieldsAndLeavesTheBytesAfterTheBody) {
  const std::string wire = "3\r\nabc\r\n0\r\nx-trailer: 1\r\nx-other: 2\r\n\r\nHTTP/1.1 200 OK";
  ChunkedDecoder d;
  std::string out;
  auto r = d.Feed(wire, &out);
  EXPECT_EQ(r.status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(wire.substr(r.used), "HTTP/1.1 200 OK");
  EXPECT_EQ(out, "abc");
}

TEST(ChunkedDecoderTest, AcceptsUpperAndLowerCaseHexSizes) {
  ChunkedDecoder d;
  std::string out;
  const std::string wire = "A\r\n0123456789\r\nb\r\n0123456789a\r\n0\r\n\r\n";
  EXPECT_EQ(d.Feed(wire, &out).status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(out, "01234567890123456789a");
}

TEST(ChunkedDecoderTest, RejectsMalformedFraming) {
  for (std::string_view bad : {
           std::string_view("\r\nabc"),               // no size digits
           std::string_view("zz\r\n"),                // not hex
           std::string_view("3\nabc\r\n"),            // size line without CR
           std::string_view("3\r\nabcX\r\n"),         // data longer than its size
           std::string_view("3\r\nabc\rX"),           // CR not followed by LF
           std::string_view("1000000000000000\r\n"),  // 16 hex digits
           std::string_view("0\r\n\rX"),              // final CRLF broken
       }) {
    ChunkedDecoder d;
    std::string out;
    EXPECT_EQ(d.Feed(bad, &out).status, ChunkedDecoder::Status::kError) << bad;
  }
}

TEST(ChunkedDecoderTest, RejectsATrailerSectionOverTheLimit) {
  ChunkedDecoder d;
  std::string out;
  ASSERT_EQ(d.Feed("0\r\nx: ", &out).status, ChunkedDecoder::Status::kNeedMore);
  const std::string filler(ChunkedDecoder::kMaxTrailerBytes, 'y');
  EXPECT_EQ(d.Feed(filler, &out).status, ChunkedDecoder::Status::kError);
}

}  // namespace
}  // namespace kvroute::client
