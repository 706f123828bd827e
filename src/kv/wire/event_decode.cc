// DecodeEventBatch: one recursive-descent Decoder over MsgpackReader (event_decode_reader.h),
// from the batch down to each field's value, for every layout vLLM has published. Why one file
// of ~530 lines: the decoder is one class whose small value readers inline into the field loop
// (the build has no LTO); the token-level reader, the part that bounds every count by the
// bytes left, is already apart in event_decode_reader.h.
#include "kv/wire/event_decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <string_view>

#include "kv/wire/event_decode_reader.h"

namespace kvroute::kv {
namespace {

using internal::MsgpackReader;
using internal::Tok;

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

class Decoder : private MsgpackReader {
 public:
  Decoder(const std::uint8_t* data, std::size_t size, DecodeInfo* info)
      : MsgpackReader(data, size), info_(info) {}

  DecodeStatus Run(KvEventBatch* out) {
    *out = KvEventBatch{};
    if (Batch(out) && !AtEnd()) Fail(DecodeError::kTrailingBytes, "batch");
    return status();
  }

 private:
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

  // One element of a block's extra-keys tuple (kv/keys/extra_keys.h): text, int, bytes or a
  // [text, int] multimodal pair; any other shape is kept whole as an opaque element.
  bool ExtraKeyElement(BlockExtraKeys* out, int level, const char* what) {
    const std::size_t start = Consumed();
    Tok t;
    if (!Next(&t, what)) return false;
    ExtraKey k;
    switch (t.kind) {
      case Tok::kStr:
        k.kind = ExtraKey::Kind::kText;
        k.text = std::string(t.bytes);
        break;
      case Tok::kBin:
        k.kind = ExtraKey::Kind::kBytes;
        k.text = std::string(t.bytes);
        break;
      case Tok::kUint:
      case Tok::kNegInt:
        if (t.kind == Tok::kUint &&
            t.u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
          k.kind = ExtraKey::Kind::kOpaque;
          k.text = std::string(BytesSince(start));
          break;
        }
        k.kind = ExtraKey::Kind::kInt;
        k.number = static_cast<std::int64_t>(t.u);
        break;
      case Tok::kArray: {
        bool pair = false;
        std::uint64_t read = 0;
        if (t.n == 2) {
          Tok id;
          Tok offset;
          if (!Next(&id, what)) return false;
          ++read;
          if (id.kind == Tok::kStr) {
            k.text = std::string(id.bytes);
            if (!Next(&offset, what)) return false;
            ++read;
            if (offset.kind == Tok::kNegInt ||
                (offset.kind == Tok::kUint &&
                 offset.u <=
                     static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))) {
              pair = true;
              k.kind = ExtraKey::Kind::kMm;
              k.number = static_cast<std::int64_t>(offset.u);
            } else if (!SkipRest(offset, level + 1, what)) {
              return false;
            }
          } else if (!SkipRest(id, level + 1, what)) {
            return false;
          }
        }
        if (!pair) {
          for (std::uint64_t i = read; i < t.n; ++i) {
            if (!Skip(level + 1, what)) return false;
          }
          k.kind = ExtraKey::Kind::kOpaque;
          k.text = std::string(BytesSince(start));
        }
        break;
      }
      default:
        if (!SkipRest(t, level, what)) return false;
        k.kind = ExtraKey::Kind::kOpaque;
        k.text = std::string(BytesSince(start));
        break;
    }
    out->push_back(std::move(k));
    return true;
  }

  // extra_keys: nil (the event cannot say), or one entry per block: nil (no extra keys) or
  // the block's tuple (an element of unknown shape inside it is kept opaque).
  bool ExtraKeys(std::optional<std::vector<BlockExtraKeys>>* out, int level, const char* what) {
    Tok t;
    if (!Next(&t, what)) return false;
    if (t.kind == Tok::kNil) {
      out->reset();
      return true;
    }
    if (!Expect(t, Tok::kArray, what)) return false;
    out->emplace();
    (*out)->reserve(t.n);
    for (std::uint64_t i = 0; i < t.n; ++i) {
      Tok b;
      if (!Next(&b, what)) return false;
      BlockExtraKeys& keys = (*out)->emplace_back();
      if (b.kind == Tok::kNil) continue;
      if (!Expect(b, Tok::kArray, what)) return false;  // vLLM sends a tuple or None
      if (level + 2 > kMaxDecodeDepth) return Fail(DecodeError::kTooDeep, what);
      for (std::uint64_t j = 0; j < b.n; ++j) {
        if (!ExtraKeyElement(&keys, level + 2, what)) return false;
      }
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
        return ExtraKeys(&s.extra_keys, level, what);
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

  DecodeInfo* info_;
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
