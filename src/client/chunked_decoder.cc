#include "client/chunked_decoder.h"

#include <algorithm>
#include <cstring>

namespace kvroute::client {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

ChunkedDecoder::Result ChunkedDecoder::Feed(std::string_view in, std::string* out) {
  std::size_t i = 0;
  const std::size_t n = in.size();
  while (i < n) {
    switch (state_) {
      case State::kSize: {
        const char c = in[i];
        const int v = HexValue(c);
        if (v >= 0) {
          // 15 hex digits (2^60 bytes) is far past any body; more would overflow.
          if (++size_digits_ > 15) {
            state_ = State::kError;
            return {i, Status::kError};
          }
          size_ = size_ * 16 + static_cast<std::uint64_t>(v);
          ++i;
          break;
        }
        if (size_digits_ == 0) {
          state_ = State::kError;
          return {i, Status::kError};
        }
        if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = State::kExtension;
        } else {
          state_ = State::kError;
          return {i, Status::kError};
        }
        ++i;
        break;
      }
      case State::kExtension: {
        const auto* cr = static_cast<const char*>(std::memchr(in.data() + i, '\r', n - i));
        if (cr == nullptr) {
          i = n;
          break;
        }
        i = static_cast<std::size_t>(cr - in.data()) + 1;
        state_ = State::kSizeLf;
        break;
      }
      case State::kSizeLf:
        if (in[i] != '\n') {
          state_ = State::kError;
          return {i, Status::kError};
        }
        ++i;
        if (size_ == 0) {
          state_ = State::kTrailerStart;
        } else {
          remaining_ = size_;
          state_ = State::kData;
        }
        size_ = 0;
        size_digits_ = 0;
        break;
      case State::kData: {
        const std::size_t take =
            static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, n - i));
        out->append(in.data() + i, take);
        i += take;
        remaining_ -= take;
        if (remaining_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
      case State::kDataLf: {
        const char want = state_ == State::kDataCr ? '\r' : '\n';
        if (in[i] != want) {
          state_ = State::kError;
          return {i, Status::kError};
        }
        ++i;
        state_ = state_ == State::kDataCr ? State::kDataLf : State::kSize;
        break;
      }
      case State::kTrailerStart:
        if (in[i] == '\r') {
          state_ = State::kFinalLf;
        } else {
          state_ = State::kTrailerLine;
        }
        ++i;
        if (++trailer_bytes_ > kMaxTrailerBytes) {
          state_ = State::kError;
          return {i, Status::kError};
        }
        break;
      case State::kTrailerLine: {
        const auto* cr = static_cast<const char*>(std::memchr(in.data() + i, '\r', n - i));
        const std::size_t end = cr == nullptr ? n : static_cast<std::size_t>(cr - in.data()) + 1;
        trailer_bytes_ += end - i;
        i = end;
        if (trailer_bytes_ > kMaxTrailerBytes) {
          state_ = State::kError;
          return {i, Status::kError};
        }
        if (cr != nullptr) state_ = State::kTrailerLf;
        break;
      }
      case State::kTrailerLf:
      case State::kFinalLf:
        if (in[i] != '\n') {
          state_ = State::kError;
          return {i, Status::kError};
        }
        ++i;
        if (state_ == State::kFinalLf) {
          state_ = State::kDone;
          return {i, Status::kDone};
        }
        state_ = State::kTrailerStart;
        break;
      case State::kDone:
        return {i, Status::kDone};
      case State::kError:
        return {i, Status::kError};
    }
  }
  if (state_ == State::kDone) return {i, Status::kDone};
  if (state_ == State::kError) return {i, Status::kError};
  return {i, Status::kNeedMore};
}

}  // namespace kvroute::client
