// ChunkedDecoder: an incremental decoder of an HTTP/1.1 chunked message body (RFC 9112 §7.1),
// for ResponseStream's body reads. Why not Beast's parser for this part: a relayed token
// stream is one small chunk per token, and `basic_parser::put` spent ~1.2k instructions per
// chunk (callgrind, docs/bench/proxy-overhead.md); this loop is a few per byte of framing plus one append.
//
// Feed it bytes as they arrive, split anywhere; it appends the chunk data to `out` and stops
// after the final CRLF (bytes after it, a next pipelined response, are not consumed).
// Chunk extensions and trailer fields are skipped (not validated beyond their line ends).
// Errors: a bad chunk size (no hex digit, more than 15 hex digits), a missing CRLF after a size
// line or chunk data, a trailer section over kMaxTrailerBytes.
//
// Ownership: plain value, one per response. Thread safety: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvroute::client {

class ChunkedDecoder {
 public:
  static constexpr std::size_t kMaxTrailerBytes = 64 * 1024;

  enum class Status { kNeedMore, kDone, kError };
  struct Result {
    std::size_t used = 0;  // bytes of the input consumed
    Status status = Status::kNeedMore;
  };

  // Decodes as much of `in` as possible, appending chunk data to *out.
  Result Feed(std::string_view in, std::string* out);

  bool done() const { return state_ == State::kDone; }

 private:
  enum class State {
    kSize,          // hex digits of a chunk size
    kExtension,     // after the size: skip to CR
    kSizeLf,        // LF of the size line
    kData,          // chunk data, remaining_ bytes left
    kDataCr,        // CR after chunk data
    kDataLf,        // LF after chunk data
    kTrailerStart,  // start of a trailer line, or the final CRLF
    kTrailerLine,   // inside a trailer field line: skip to CR
    kTrailerLf,     // LF ending a trailer line
    kFinalLf,       // LF of the final CRLF
    kDone,
    kError,
  };

  State state_ = State::kSize;
  std::uint64_t size_ = 0;       // chunk size being read
  int size_digits_ = 0;          // hex digits read for size_
  std::uint64_t remaining_ = 0;  // chunk data bytes left
  std::size_t trailer_bytes_ = 0;
};

}  // namespace kvroute::client
