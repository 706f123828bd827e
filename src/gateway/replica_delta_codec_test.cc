// The replica delta wire format (replica_delta_codec.h): round trips, framing across
// arbitrary piece boundaries, and the malformed inputs that must break a stream.
#include "gateway/replica_delta_codec.h"

#include <gtest/gtest.h>

namespace kvroute::gateway {
namespace {

std::vector<Delta> Sample() {
  return {HelloDelta{.instance = 0x0123456789abcdefULL},
          BookedDelta{.id = 300, .worker = "w1", .prompt_tokens = 6000, .uncached_tokens = 400,
                      .kv_blocks = 383, .first_token_seen = true},
          FirstTokenDelta{301},
          ReleasedDelta{~RequestId{0} >> 2},
          PredictedDelta{.worker = "w0", .keys = {1, ~kv::BlockKey{0}, 42}}};
}

TEST(ReplicaDeltaCodecTest, EveryDeltaRoundTrips) {
  const std::vector<Delta> in = Sample();
  std::vector<Delta> out;
  FrameDecoder d;
  auto n = d.Feed(EncodeFrame(in), &out);
  ASSERT_TRUE(n.has_value()) << n.error();
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(out, in);
}

TEST(ReplicaDeltaCodecTest, FramesSplitAtEveryByteDecodeTheSame) {
  std::string stream = EncodeFrame(Sample());
  AppendFrame({}, &stream);  // a heartbeat between frames adds nothing
  stream += EncodeFrame({ReleasedDelta{7}});
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    FrameDecoder d;
    std::vector<Delta> out;
    std::size_t frames = 0;
    frames += *d.Feed(std::string_view(stream).substr(0, cut), &out);
    frames += *d.Feed(std::string_view(stream).substr(cut), &out);
    EXPECT_EQ(frames, 3u) << cut;
    ASSERT_EQ(out.size(), Sample().size() + 1) << cut;
    EXPECT_EQ(out.back(), Delta(ReleasedDelta{7}));
  }
}

TEST(ReplicaDeltaCodecTest, ABookedDeltaIsCompact) {
  std::string payload;
  AppendDelta(BookedDelta{.id = 12345, .worker = "gpu-07", .prompt_tokens = 6000,
                          .uncached_tokens = 400, .kv_blocks = 383},
              &payload);
  EXPECT_EQ(payload.size(), 17u);  // tag, 2-byte id, 7-byte name, 2+2+2 counts, flags
  std::string released;
  AppendDelta(ReleasedDelta{12345}, &released);
  EXPECT_EQ(released.size(), 3u);
}

TEST(ReplicaDeltaCodecTest, MalformedPayloadsAreErrors) {
  EXPECT_FALSE(DecodePayload(std::string("\x09", 1)).has_value());         // unknown tag
  EXPECT_FALSE(DecodePayload(std::string("\x02\x05\x09w", 4)).has_value());  // truncated name
  EXPECT_FALSE(DecodePayload(std::string("\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12))
                   .has_value());  // varint over 10 bytes
  std::string many;
  AppendDelta(PredictedDelta{.worker = "w", .keys = {1, 2}}, &many);
  many.resize(many.size() - 3);  // the last key cut short
  EXPECT_FALSE(DecodePayload(many).has_value());
  FrameDecoder d;
  std::vector<Delta> out;
  EXPECT_FALSE(d.Feed(std::string("\x02\x09\x00", 3), &out).has_value());  // bad tag in a frame
  FrameDecoder big;
  EXPECT_FALSE(big.Feed(std::string("\xff\xff\xff\xff\x7f", 5), &out).has_value());  // > 16 MiB
}

TEST(ReplicaDeltaCodecTest, AnIncompleteFrameWaitsForMoreBytes) {
  const std::string frame = EncodeFrame({FirstTokenDelta{5}});
  FrameDecoder d;
  std::vector<Delta> out;
  EXPECT_EQ(*d.Feed(std::string_view(frame).substr(0, frame.size() - 1), &out), 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(*d.Feed(std::string_view(frame).substr(frame.size() - 1), &out), 1u);
  EXPECT_EQ(out, std::vector<Delta>{FirstTokenDelta{5}});
}

}  // namespace
}  // namespace kvroute::gateway
