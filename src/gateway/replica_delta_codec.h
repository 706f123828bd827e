// The replica delta stream's wire format (docs/replicas.md): what one kvroute replica tells
// its siblings about the bookings and predicted blocks only a router knows. I/O-free.
//
//   stream   := frame*
//   frame    := varint(payload length) payload          (payload length 0: a heartbeat)
//   payload  := delta*
//   delta    := u8 tag, fields:
//     1 hello        u64le instance id, varint format version
//     2 booked       varint request id, string worker, varint prompt tokens, varint uncached
//                    tokens, varint kv blocks, u8 flags (bit 0: first token already seen)
//     3 first_token  varint request id
//     4 released     varint request id
//     5 predicted    string worker, varint n, n × u64le block keys
//   string   := varint length, bytes;  varint := unsigned LEB128 (at most 10 bytes)
//
// A decoder rejects an unknown tag, a truncated delta inside a frame, a varint over 10
// bytes, a string over kMaxWorkerNameBytes or more than kMaxPredictedKeys keys: the stream
// is then broken and the subscriber drops it (docs/replicas.md "Ordering and loss").
//
// Thread safety: values and pure functions; a FrameDecoder belongs to one reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/types.h"
#include "kv/keys/block_key.h"

namespace kvroute::gateway {

inline constexpr std::uint32_t kDeltaFormatVersion = 1;
inline constexpr std::size_t kMaxWorkerNameBytes = 1024;
inline constexpr std::size_t kMaxPredictedKeys = 1 << 16;
inline constexpr std::size_t kMaxFrameBytes = 16u << 20;

struct HelloDelta {
  std::uint64_t instance = 0;
  std::uint32_t version = kDeltaFormatVersion;
  bool operator==(const HelloDelta&) const = default;
};
struct BookedDelta {
  RequestId id = 0;
  std::string worker;
  std::uint64_t prompt_tokens = 0;
  std::uint64_t uncached_tokens = 0;
  std::uint64_t kv_blocks = 0;
  bool first_token_seen = false;  // set in a new stream's replay of a request past it
  bool operator==(const BookedDelta&) const = default;
};
struct FirstTokenDelta {
  RequestId id = 0;
  bool operator==(const FirstTokenDelta&) const = default;
};
struct ReleasedDelta {
  RequestId id = 0;
  bool operator==(const ReleasedDelta&) const = default;
};
struct PredictedDelta {
  std::string worker;
  std::vector<kv::BlockKey> keys;
  bool operator==(const PredictedDelta&) const = default;
};

using Delta = std::variant<HelloDelta, BookedDelta, FirstTokenDelta, ReleasedDelta, PredictedDelta>;

// Appends one delta's bytes (no frame header) to `out`.
void AppendDelta(const Delta& delta, std::string* out);
// Appends one frame carrying `payload` (AppendDelta's bytes; empty: a heartbeat).
void AppendFrame(std::string_view payload, std::string* out);
// A frame of `deltas`, for tests and the replay.
std::string EncodeFrame(const std::vector<Delta>& deltas);

// Decodes a frame's payload into its deltas.
std::expected<std::vector<Delta>, std::string> DecodePayload(std::string_view payload);

// Splits a byte stream, fed in arbitrary pieces, into frames.
class FrameDecoder {
 public:
  // Appends `bytes`; every frame completed is decoded into `out` (heartbeats add nothing).
  // Returns the number of frames completed, or an error (the stream is then unusable).
  std::expected<std::size_t, std::string> Feed(std::string_view bytes, std::vector<Delta>* out);

 private:
  std::string buffer_;  // bytes of the frame being received
};

}  // namespace kvroute::gateway
