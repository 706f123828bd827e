// Decoder of vLLM KV event batches from msgpack (sans-I/O, pure, untrusted input).
//
// Accepts every envelope generation of shared/reference/vllm-protocol.md §1.6:
//   - batch: [ts, events], [ts, events, dp_rank] (extra trailing elements ignored), or a map
//     {"ts", "events", "data_parallel_rank"} (unknown keys ignored);
//   - events: tagged arrays of any length from the first layout (BlockStored with 5 fields,
//     BlockRemoved [tag, hashes]) up to 11 fields and beyond (unknown trailing elements are
//     ignored), or maps with a "type" key (fields selected by name, unknown keys ignored);
//   - hashes: int64 (kept as two's complement), uint64, or bin (last 8 bytes big-endian;
//     shorter bins are read as a big-endian number);
//   - token_ids: ints, or [t, t+1] bigram pairs (EAGLE) of which the first element is kept;
//   - ts: float32, float64 or an int; NaN and infinities are rejected.
// Events with an unknown tag are skipped and counted, not errors: a newer engine may add event
// types the index does not need. A nil medium stays nullopt, which kv_event.h defines as GPU.
//
// Malformed input returns an error, never crashes or throws. Work and memory are bounded by
// the input: a count or length larger than the bytes left is an error before anything is
// allocated, and values are nested at most kMaxDecodeDepth deep.
//
// This header is deliberately C++17/20-only (no <expected>): the libFuzzer target
// (fuzz/event_decode_fuzz.cc) is compiled with clang 14.
//
// Thread safety: pure functions over their arguments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv/kv_event.h"

namespace kvroute::kv {

inline constexpr int kMaxDecodeDepth = 32;

enum class DecodeError : std::uint8_t {
  kOk = 0,
  kTruncated,       // input ends inside a value
  kTrailingBytes,   // bytes left after the batch
  kBadMsgpack,      // a byte that is not a msgpack type (0xc1)
  kUnexpectedType,  // a value of the wrong msgpack type for its field
  kTooLarge,        // a count or length exceeds the bytes left
  kTooDeep,         // nesting deeper than kMaxDecodeDepth
  kMissingField,    // a required field is absent (array too short, map key missing)
  kInvalidValue,    // right type, value out of range (token id >= 2^32, block_size 0, NaN ts)
};

const char* DecodeErrorName(DecodeError error);

struct DecodeStatus {
  DecodeError error = DecodeError::kOk;
  std::size_t offset = 0;   // byte offset where the problem was noticed
  const char* detail = "";  // static string naming the field, for logs
  bool ok() const { return error == DecodeError::kOk; }
};

struct DecodeInfo {
  std::uint32_t unknown_events = 0;  // events skipped because their tag is unknown
};

// Decodes one PUB payload into *out (overwritten; left unspecified on error). `info` may be
// null.
DecodeStatus DecodeEventBatch(const std::uint8_t* data, std::size_t size, KvEventBatch* out,
                              DecodeInfo* info = nullptr);

}  // namespace kvroute::kv
