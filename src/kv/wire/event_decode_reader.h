// MsgpackReader: the token layer of the KV event decoder (private to kv/wire/event_decode.cc).
//
// Wraps libmpack's token reader over one complete, untrusted buffer and converts each value
// head into a Tok. Everything that could make work or memory grow with a lying header is
// checked here: a container whose child count exceeds the bytes left, or a blob longer than
// the bytes left, is kTooLarge before the caller allocates; SkipRest walks unknown values
// iteratively with a fixed stack of kMaxDecodeDepth counters. The first error is kept with
// its offset.
//
// Kept to C++20 for the clang 14 fuzzer build, like event_decode.h.
// Thread safety: one reader per buffer and thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "kv/wire/event_decode.h"

extern "C" {
#include <mpack.h>
}
// mpack.h defines `bool` as a macro when it is not one (it never is in C++).
#undef bool

namespace kvroute::kv::internal {

// One msgpack value head, converted out of libmpack's token form.
struct Tok {
  enum Kind { kNil, kBool, kUint, kNegInt, kFloat, kArray, kMap, kStr, kBin, kExt } kind = kNil;
  std::uint64_t u = 0;     // kUint value; kNegInt two's-complement bits
  double f = 0;            // kFloat
  std::uint64_t n = 0;     // element count (kArray), pair count (kMap), byte length (blobs)
  std::string_view bytes;  // blob payload

  bool IsContainer() const { return kind == kArray || kind == kMap; }
  // Values a container holds: a map holds a key and a value per pair.
  std::uint64_t Children() const { return kind == kMap ? 2 * n : kind == kArray ? n : 0; }
};

class MsgpackReader {
 protected:
  MsgpackReader(const std::uint8_t* data, std::size_t size)
      : p_(reinterpret_cast<const char*>(data)), left_(size), size_(size) {
    mpack_tokbuf_init(&tokbuf_);
  }

  bool AtEnd() const { return left_ == 0; }
  // Bytes consumed so far, and the bytes consumed since an earlier Consumed() (raw values).
  std::size_t Consumed() const { return size_ - left_; }
  std::string_view BytesSince(std::size_t consumed) const {
    return std::string_view(p_ - (Consumed() - consumed), Consumed() - consumed);
  }
  const DecodeStatus& status() const { return status_; }

  bool Fail(DecodeError e, const char* detail) {
    if (status_.ok()) status_ = DecodeStatus{e, size_ - left_, detail};
    return false;
  }

  // Reads one value head; a blob's payload is read too, a container's children are not.
  bool Next(Tok* t, const char* what) {
    if (left_ == 0) return Fail(DecodeError::kTruncated, what);
    mpack_token_t m;
    int rc = mpack_read(&tokbuf_, &p_, &left_, &m);
    if (rc == MPACK_EOF) return Fail(DecodeError::kTruncated, what);
    if (rc != MPACK_OK) return Fail(DecodeError::kBadMsgpack, what);
    const std::uint64_t bits =
        (m.length == 8 ? static_cast<std::uint64_t>(m.data.value.hi) << 32 : 0) | m.data.value.lo;
    *t = Tok{};
    switch (m.type) {
      case MPACK_TOKEN_NIL:
        t->kind = Tok::kNil;
        return true;
      case MPACK_TOKEN_BOOLEAN:
        t->kind = Tok::kBool;
        t->u = m.data.value.lo;
        return true;
      case MPACK_TOKEN_UINT:
        t->kind = Tok::kUint;
        t->u = bits;
        return true;
      case MPACK_TOKEN_SINT: {
        // libmpack turns non-negative signed forms into UINT, so the sign bit is set here;
        // extend it from the encoded width.
        t->kind = Tok::kNegInt;
        const unsigned width = 8 * m.length;
        t->u = width < 64 ? bits | ~((std::uint64_t{1} << width) - 1) : bits;
        return true;
      }
      case MPACK_TOKEN_FLOAT:
        t->kind = Tok::kFloat;
        if (m.length == 4) {
          float f;
          std::uint32_t lo = m.data.value.lo;
          std::memcpy(&f, &lo, sizeof(f));
          t->f = f;
        } else {
          std::memcpy(&t->f, &bits, sizeof(t->f));
        }
        return true;
      case MPACK_TOKEN_ARRAY:
      case MPACK_TOKEN_MAP:
        t->kind = m.type == MPACK_TOKEN_ARRAY ? Tok::kArray : Tok::kMap;
        t->n = m.length;
        // Every child takes at least one byte: this bounds every later allocation.
        if (t->Children() > left_) return Fail(DecodeError::kTooLarge, what);
        return true;
      case MPACK_TOKEN_STR:
      case MPACK_TOKEN_BIN:
      case MPACK_TOKEN_EXT:
        t->kind = m.type == MPACK_TOKEN_STR   ? Tok::kStr
                  : m.type == MPACK_TOKEN_BIN ? Tok::kBin
                                              : Tok::kExt;
        t->n = m.length;
        return Blob(t, what);
      default:
        return Fail(DecodeError::kBadMsgpack, what);
    }
  }

  bool Blob(Tok* t, const char* what) {
    if (t->n > left_) return Fail(DecodeError::kTooLarge, what);
    if (t->n == 0) return true;
    mpack_token_t chunk;
    if (mpack_read(&tokbuf_, &p_, &left_, &chunk) != MPACK_OK || chunk.type != MPACK_TOKEN_CHUNK ||
        chunk.length != t->n) {
      return Fail(DecodeError::kTruncated, what);
    }
    t->bytes = std::string_view(chunk.data.chunk_ptr, chunk.length);
    return true;
  }

  // Skips the rest of a value whose head `t` was read at nesting level `level`, iteratively
  // (no recursion on untrusted input).
  bool SkipRest(const Tok& t, int level, const char* what) {
    if (!t.IsContainer()) return true;
    if (level > kMaxDecodeDepth) return Fail(DecodeError::kTooDeep, what);
    std::uint64_t pending[kMaxDecodeDepth + 1];
    int top = 0;
    pending[top++] = t.Children();
    while (top > 0) {
      if (pending[top - 1] == 0) {
        --top;
        continue;
      }
      --pending[top - 1];
      Tok child;
      if (!Next(&child, what)) return false;
      if (!child.IsContainer()) continue;
      if (level + top + 1 > kMaxDecodeDepth) return Fail(DecodeError::kTooDeep, what);
      pending[top++] = child.Children();
    }
    return true;
  }

  bool Skip(int level, const char* what) {
    Tok t;
    return Next(&t, what) && SkipRest(t, level, what);
  }

  bool Expect(const Tok& t, Tok::Kind kind, const char* what) {
    return t.kind == kind || Fail(DecodeError::kUnexpectedType, what);
  }

  bool Str(Tok* t, const char* what) { return Next(t, what) && Expect(*t, Tok::kStr, what); }

 private:
  const char* p_;
  std::size_t left_;
  const std::size_t size_;
  mpack_tokbuf_t tokbuf_;
  DecodeStatus status_;
};

}  // namespace kvroute::kv::internal
