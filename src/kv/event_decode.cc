#include "kv/event_decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <string_view>

extern "C" {
#include <mpack.h>
}
// mpack.h defines `bool` as a macro when it is not one (it never is in C++).
#undef bool

namespace kvroute::kv {
namespace {

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

// Field of a KV event; also the array position (after the tag) of BlockStored fields.
enum Field : int {
  kBlockHashes = 0,
  kParentBlockHash,
  kTokenIds,
  kBlockSize,
  kLoraId,
  kMedium,
  kLoraName,
  kExtraKeys,
  kGroupIdx,
  kSpecKind,
  kSpecWindow,
  kNumFields,
  kUnknownField = kNumFields,
};

constexpr std::string_view kFieldNames[kNumFields] = {"block_hashes",
                                                      "parent_block_hash",
                                                      "token_ids",
                                                      "block_size",
                                                      "lora_id",
                                                      "medium",
                                                      "lora_name",
                                                      "extra_keys",
                                                      "group_idx",
                                                      "kv_cache_spec_kind",
                                                      "kv_cache_spec_sliding_window"};

// Array positions (after the tag) of BlockRemoved fields.
constexpr Field kRemovedOrder[] = {kBlockHashes, kMedium, kGroupIdx};
constexpr int kMinStoredFields = 5;  // vLLM <= v0.9.0: block_hashes .. lora_id

Field FieldByName(std::string_view name) {
  for (int i = 0; i < kNumFields; ++i) {
    if (kFieldNames[i] == name) return static_cast<Field>(i);
  }
  return kUnknownField;
}

enum class Tag { kStored, kRemoved, kCleared, kUnknown };

Tag TagByName(std::string_view name) {
  if (name == "BlockStored") return Tag::kStored;
  if (name == "BlockRemoved") return Tag::kRemoved;
  if (name == "AllBlocksCleared") return Tag::kCleared;
  return Tag::kUnknown;
}

// Every field any event may carry; assembled into the right event once the tag is known
// (a map event may name its "type" after its fields).
struct Fields {
  bool seen[kNumFields] = {};
  BlockStored stored;  // holds every field BlockRemoved has too
};

class Decoder {
 public:
  Decoder(const std::uint8_t* data, std::size_t size, DecodeInfo* info)
      : p_(reinterpret_cast<const char*>(data)), left_(size), size_(size), info_(info) {
    mpack_tokbuf_init(&tokbuf_);
  }

  DecodeStatus Run(KvEventBatch* out) {
    *out = KvEventBatch{};
    if (Batch(out) && left_ != 0) Fail(DecodeError::kTrailingBytes, "batch");
    return status_;
  }

 private:
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

  bool OptionalStr(std::optional<std::string>* out, const char* what) {
    Tok t;
    if (!Next(&t, what)) return false;
    if (t.kind == Tok::kNil) {
      out->reset();
      return true;
    }
    if (!Expect(t, Tok::kStr, what)) return false;
    out->emplace(t.bytes);
    return true;
  }

  bool Int(const Tok& t, std::int64_t* out, const char* what) {
    if (t.kind == Tok::kNegInt) {
      *out = static_cast<std::int64_t>(t.u);
      return true;
    }
    if (t.kind != Tok::kUint) return Fail(DecodeError::kUnexpectedType, what);
    if (t.u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return Fail(DecodeError::kInvalidValue, what);
    }
    *out = static_cast<std::int64_t>(t.u);
    return true;
  }

  bool OptionalInt(std::optional<std::int64_t>* out, const char* what) {
    Tok t;
    if (!Next(&t, what)) return false;
    if (t.kind == Tok::kNil) {
      out->reset();
      return true;
    }
    std::int64_t v;
    if (!Int(t, &v, what)) return false;
    *out = v;
    return true;
  }

  bool Hash(const Tok& t, EngineHash* out, const char* what) {
    switch (t.kind) {
      case Tok::kUint:
      case Tok::kNegInt:
        *out = t.u;
        return true;
      case Tok::kBin: {
        if (t.bytes.empty()) return Fail(DecodeError::kInvalidValue, what);
        std::string_view low = t.bytes.substr(t.bytes.size() > 8 ? t.bytes.size() - 8 : 0);
        EngineHash h = 0;
        for (char c : low) h = (h << 8) | static_cast<std::uint8_t>(c);
        *out = h;
        return true;
      }
      default:
        return Fail(DecodeError::kUnexpectedType, what);
    }
  }

  bool Hashes(std::vector<EngineHash>* out, const char* what) {
    Tok t;
    if (!Next(&t, what) || !Expect(t, Tok::kArray, what)) return false;
    out->clear();
    out->reserve(t.n);
    for (std::uint64_t i = 0; i < t.n; ++i) {
      Tok h;
      EngineHash v;
      if (!Next(&h, what) || !Hash(h, &v, what)) return false;
      out->push_back(v);
    }
    return true;
  }

  bool TokenId(const Tok& t, kvroute::TokenId* out, const char* what) {
    if (t.kind == Tok::kNegInt) return Fail(DecodeError::kInvalidValue, what);
    if (t.kind != Tok::kUint) return Fail(DecodeError::kUnexpectedType, what);
    if (t.u > std::numeric_limits<kvroute::TokenId>::max()) {
      return Fail(DecodeError::kInvalidValue, what);
    }
    *out = static_cast<kvroute::TokenId>(t.u);
    return true;
  }

  bool TokenIds(std::vector<kvroute::TokenId>* out, int level, const char* what) {
    Tok t;
    if (!Next(&t, what) || !Expect(t, Tok::kArray, what)) return false;
    out->clear();
    out->reserve(t.n);
    for (std::uint64_t i = 0; i < t.n; ++i) {
      Tok e;
      if (!Next(&e, what)) return false;
      kvroute::TokenId id;
      if (e.kind == Tok::kArray) {
        // EAGLE bigram pair [t, t+1]: the block's token is the first element.
        if (e.n == 0) return Fail(DecodeError::kInvalidValue, what);
        Tok first;
        if (!Next(&first, what) || !TokenId(first, &id, what)) return false;
        for (std::uint64_t k = 1; k < e.n; ++k) {
          if (!Skip(level + 2, what)) return false;
        }
      } else if (!TokenId(e, &id, what)) {
        return false;
      }
      out->push_back(id);
    }
    return true;
  }

  // Reads the value of `field` at nesting level `level` into *f.
  bool ReadField(Field field, Fields* f, int level) {
    if (field == kUnknownField) return Skip(level, "unknown field");
    BlockStored& s = f->stored;
    const char* what = kFieldNames[field].data();  // names are NUL-terminated literals
    f->seen[field] = true;
    switch (field) {
      case kBlockHashes:
        return Hashes(&s.block_hashes, what);
      case kParentBlockHash: {
        Tok t;
        if (!Next(&t, what)) return false;
        if (t.kind == Tok::kNil) {
          s.parent_block_hash.reset();
          return true;
        }
        EngineHash h;
        if (!Hash(t, &h, what)) return false;
        s.parent_block_hash = h;
        return true;
      }
      case kTokenIds:
        return TokenIds(&s.token_ids, level, what);
      case kBlockSize: {
        Tok t;
        if (!Next(&t, what) || !Expect(t, Tok::kUint, what)) return false;
        if (t.u == 0 || t.u > std::numeric_limits<std::uint32_t>::max()) {
          return Fail(DecodeError::kInvalidValue, what);
        }
        s.block_size = static_cast<std::uint32_t>(t.u);
        return true;
      }
      case kLoraId:
        return OptionalInt(&s.lora_id, what);
      case kMedium:
        return OptionalStr(&s.medium, what);
      case kLoraName:
        return OptionalStr(&s.lora_name, what);
      case kExtraKeys:
        // Per-block extra-key tuples (LoRA name, cache salt, multimodal hashes): kvroute
        // derives these itself, so they are validated as msgpack and dropped.
        return Skip(level, what);
      case kGroupIdx:
        return OptionalInt(&s.group_idx, what);
      case kSpecKind:
        return OptionalStr(&s.kv_cache_spec_kind, what);
      case kSpecWindow:
        return OptionalInt(&s.kv_cache_spec_sliding_window, what);
      case kUnknownField:
        break;
    }
    return Skip(level, "unknown field");
  }

  // Appends the event described by `tag` and `f` to *out; false (with status) when a
  // required field is missing.
  bool Assemble(Tag tag, Fields* f, std::vector<KvEvent>* out) {
    switch (tag) {
      case Tag::kStored:
        if (!f->seen[kBlockHashes]) return Fail(DecodeError::kMissingField, "block_hashes");
        if (!f->seen[kTokenIds]) return Fail(DecodeError::kMissingField, "token_ids");
        if (!f->seen[kBlockSize]) return Fail(DecodeError::kMissingField, "block_size");
        out->emplace_back(std::move(f->stored));
        return true;
      case Tag::kRemoved: {
        if (!f->seen[kBlockHashes]) return Fail(DecodeError::kMissingField, "block_hashes");
        BlockRemoved r;
        r.block_hashes = std::move(f->stored.block_hashes);
        r.medium = std::move(f->stored.medium);
        r.group_idx = f->stored.group_idx;
        out->emplace_back(std::move(r));
        return true;
      }
      case Tag::kCleared:
        out->emplace_back(AllBlocksCleared{});
        return true;
      case Tag::kUnknown:
        if (info_ != nullptr) ++info_->unknown_events;
        return true;
    }
    return true;
  }

  // An event at nesting level `level`.
  bool Event(std::vector<KvEvent>* out, int level) {
    Tok t;
    if (!Next(&t, "event")) return false;
    Fields f;
    if (t.kind == Tok::kArray) {
      if (t.n == 0) return Fail(DecodeError::kMissingField, "event tag");
      Tok tag_tok;
      if (!Str(&tag_tok, "event tag")) return false;
      const Tag tag = TagByName(tag_tok.bytes);
      const std::uint64_t fields = t.n - 1;
      std::uint64_t known = 0;
      if (tag == Tag::kStored) {
        if (fields < kMinStoredFields) return Fail(DecodeError::kMissingField, "BlockStored");
        known = std::min<std::uint64_t>(fields, kNumFields);
        for (std::uint64_t i = 0; i < known; ++i) {
          if (!ReadField(static_cast<Field>(i), &f, level + 1)) return false;
        }
      } else if (tag == Tag::kRemoved) {
        if (fields < 1) return Fail(DecodeError::kMissingField, "BlockRemoved");
        known = std::min<std::uint64_t>(fields, std::size(kRemovedOrder));
        for (std::uint64_t i = 0; i < known; ++i) {
          if (!ReadField(kRemovedOrder[i], &f, level + 1)) return false;
        }
      }
      for (std::uint64_t i = known; i < fields; ++i) {
        if (!Skip(level + 1, "trailing event field")) return false;
      }
      return Assemble(tag, &f, out);
    }
    if (t.kind != Tok::kMap) return Fail(DecodeError::kUnexpectedType, "event");
    bool have_tag = false;
    Tag tag = Tag::kUnknown;
    for (std::uint64_t i = 0; i < t.n; ++i) {
      Tok key;
      if (!Str(&key, "event key")) return false;
      if (key.bytes == "type") {
        Tok tag_tok;
        if (!Str(&tag_tok, "type")) return false;
        tag = TagByName(tag_tok.bytes);
        have_tag = true;
        continue;
      }
      if (!ReadField(FieldByName(key.bytes), &f, level + 1)) return false;
    }
    if (!have_tag) return Fail(DecodeError::kMissingField, "type");
    return Assemble(tag, &f, out);
  }

  bool Events(std::vector<KvEvent>* out, int level) {
    Tok t;
    if (!Next(&t, "events") || !Expect(t, Tok::kArray, "events")) return false;
    out->reserve(t.n);
    for (std::uint64_t i = 0; i < t.n; ++i) {
      if (!Event(out, level + 1)) return false;
    }
    return true;
  }

  bool Ts(double* out) {
    Tok t;
    if (!Next(&t, "ts")) return false;
    switch (t.kind) {
      case Tok::kFloat:
        // NaN or infinity would poison every age computed from ts downstream.
        if (!std::isfinite(t.f)) return Fail(DecodeError::kInvalidValue, "ts");
        *out = t.f;
        return true;
      case Tok::kUint:
        *out = static_cast<double>(t.u);
        return true;
      case Tok::kNegInt:
        *out = static_cast<double>(static_cast<std::int64_t>(t.u));
        return true;
      default:
        return Fail(DecodeError::kUnexpectedType, "ts");
    }
  }

  bool Batch(KvEventBatch* out) {
    constexpr int kLevel = 1;
    Tok t;
    if (!Next(&t, "batch")) return false;
    if (t.kind == Tok::kArray) {
      if (t.n < 2) return Fail(DecodeError::kMissingField, "batch");
      if (!Ts(&out->ts) || !Events(&out->events, kLevel + 1)) return false;
      if (t.n >= 3 && !OptionalInt(&out->data_parallel_rank, "data_parallel_rank")) return false;
      for (std::uint64_t i = 3; i < t.n; ++i) {
        if (!Skip(kLevel + 1, "trailing batch field")) return false;
      }
      return true;
    }
    if (t.kind != Tok::kMap) return Fail(DecodeError::kUnexpectedType, "batch");
    bool have_ts = false;
    bool have_events = false;
    for (std::uint64_t i = 0; i < t.n; ++i) {
      Tok key;
      if (!Str(&key, "batch key")) return false;
      bool ok;
      if (key.bytes == "ts") {
        ok = Ts(&out->ts);
        have_ts = true;
      } else if (key.bytes == "events") {
        out->events.clear();
        ok = Events(&out->events, kLevel + 1);
        have_events = true;
      } else if (key.bytes == "data_parallel_rank") {
        ok = OptionalInt(&out->data_parallel_rank, "data_parallel_rank");
      } else {
        ok = Skip(kLevel + 1, "unknown batch key");
      }
      if (!ok) return false;
    }
    if (!have_ts) return Fail(DecodeError::kMissingField, "ts");
    if (!have_events) return Fail(DecodeError::kMissingField, "events");
    return true;
  }

  const char* p_;
  std::size_t left_;
  const std::size_t size_;
  DecodeInfo* info_;
  mpack_tokbuf_t tokbuf_;
  DecodeStatus status_;
};

}  // namespace

const char* DecodeErrorName(DecodeError error) {
  switch (error) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kTruncated:
      return "truncated";
    case DecodeError::kTrailingBytes:
      return "trailing bytes";
    case DecodeError::kBadMsgpack:
      return "bad msgpack";
    case DecodeError::kUnexpectedType:
      return "unexpected type";
    case DecodeError::kTooLarge:
      return "length exceeds input";
    case DecodeError::kTooDeep:
      return "nesting too deep";
    case DecodeError::kMissingField:
      return "missing field";
    case DecodeError::kInvalidValue:
      return "invalid value";
  }
  return "?";
}

DecodeStatus DecodeEventBatch(const std::uint8_t* data, std::size_t size, KvEventBatch* out,
                              DecodeInfo* info) {
  if (data == nullptr && size != 0) {
    return DecodeStatus{DecodeError::kTruncated, 0, "batch"};
  }
  return Decoder(data, size, info).Run(out);
}

}  // namespace kvroute::kv
