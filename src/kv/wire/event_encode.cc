#include "kv/wire/event_encode.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>

extern "C" {
#include <mpack.h>
}
// mpack.h defines `bool` as a macro when it is not one (it never is in C++).
#undef bool

namespace kvroute::kv {
namespace {

// Field names and tags exactly as vLLM's msgspec structs spell them.
constexpr std::string_view kTagStored = "BlockStored";
constexpr std::string_view kTagRemoved = "BlockRemoved";
constexpr std::string_view kTagCleared = "AllBlocksCleared";

// Token writer over a growing byte vector. libmpack writes the token heads (it picks the
// smallest form for unsigned ints, strings, arrays, maps); two forms are written by hand:
//  - float64: libmpack's float packers shrink to float32 when exact; msgspec never does;
//  - negative ints: libmpack 1.0.5 picks a too-small form at -129, -32769 and for values
//    below -2^31 whose low word looks small (it looks only at the low 32 bits).
class Writer {
 public:
  explicit Writer(std::vector<std::uint8_t>* out) : out_(out) { mpack_tokbuf_init(&tokbuf_); }

  void Nil() { Token(mpack_pack_nil()); }
  void Array(std::size_t n) { Token(mpack_pack_array(static_cast<mpack_uint32_t>(n))); }
  void Map(std::size_t n) { Token(mpack_pack_map(static_cast<mpack_uint32_t>(n))); }
  void Uint(std::uint64_t v) { Token(mpack_pack_uint(v)); }

  void Int(std::int64_t v) {
    if (v >= 0) return Uint(static_cast<std::uint64_t>(v));
    if (v >= -32) return Byte(static_cast<std::uint8_t>(v));
    if (v >= INT8_MIN) return BigEndian(0xd0, static_cast<std::uint64_t>(v), 1);
    if (v >= INT16_MIN) return BigEndian(0xd1, static_cast<std::uint64_t>(v), 2);
    if (v >= INT32_MIN) return BigEndian(0xd2, static_cast<std::uint64_t>(v), 4);
    BigEndian(0xd3, static_cast<std::uint64_t>(v), 8);
  }

  void Float64(double v) { BigEndian(0xcb, std::bit_cast<std::uint64_t>(v), 8); }

  void Str(std::string_view s) {
    Token(mpack_pack_str(static_cast<mpack_uint32_t>(s.size())));
    out_->insert(out_->end(), s.begin(), s.end());
  }

  void Bin(const std::uint8_t* data, std::size_t n) {
    Token(mpack_pack_bin(static_cast<mpack_uint32_t>(n)));
    out_->insert(out_->end(), data, data + n);
  }

  void Raw(std::string_view bytes) { out_->insert(out_->end(), bytes.begin(), bytes.end()); }

  template <typename T>
  void OptionalInt(const std::optional<T>& v) {
    if (v) {
      Int(static_cast<std::int64_t>(*v));
    } else {
      Nil();
    }
  }

  void OptionalStr(const std::optional<std::string>& v) {
    if (v) {
      Str(*v);
    } else {
      Nil();
    }
  }

 private:
  void Token(const mpack_token_t& tok) {
    // Reserve room for the longest head so libmpack never needs its pending buffer.
    std::size_t old = out_->size();
    out_->resize(old + MPACK_MAX_TOKEN_LEN);
    char* p = reinterpret_cast<char*>(out_->data() + old);
    std::size_t left = MPACK_MAX_TOKEN_LEN;
    mpack_write(&tokbuf_, &p, &left, &tok);
    out_->resize(old + MPACK_MAX_TOKEN_LEN - left);
  }

  void Byte(std::uint8_t b) { out_->push_back(b); }

  void BigEndian(std::uint8_t head, std::uint64_t v, int bytes) {
    out_->push_back(head);
    for (int i = bytes - 1; i >= 0; --i) out_->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }

  std::vector<std::uint8_t>* out_;
  mpack_tokbuf_t tokbuf_;
};

class EventWriter {
 public:
  EventWriter(Writer* w, const EncodeOptions& o)
      : w_(*w),
        o_(o),
        stored_fields_(std::clamp(o.array_stored_fields, kStoredFieldsV090, kStoredFieldsAll)) {}

  void Hash(EngineHash h) {
    switch (o_.hashes) {
      case HashForm::kUnsigned:
        return w_.Uint(h);
      case HashForm::kSigned:
        return w_.Int(static_cast<std::int64_t>(h));
      case HashForm::kBin8: {
        std::uint8_t be[8];
        for (int i = 0; i < 8; ++i) be[i] = static_cast<std::uint8_t>(h >> (56 - 8 * i));
        return w_.Bin(be, sizeof(be));
      }
    }
  }

  void Hashes(const std::vector<EngineHash>& hashes) {
    w_.Array(hashes.size());
    for (EngineHash h : hashes) Hash(h);
  }

  // Carried tuples as msgspec writes Python tuples (arrays); without any, the option's shape.
  void ExtraKeys(const BlockStored& e) {
    if (e.extra_keys.has_value()) {
      w_.Array(e.extra_keys->size());
      for (const BlockExtraKeys& block : *e.extra_keys) {
        if (block.empty()) {
          w_.Nil();
          continue;
        }
        w_.Array(block.size());
        for (const ExtraKey& k : block) ExtraKeyElement(k);
      }
      return;
    }
    if (!o_.extra_keys_nil_per_block) return w_.Nil();
    w_.Array(e.block_hashes.size());
    for (std::size_t i = 0; i < e.block_hashes.size(); ++i) w_.Nil();
  }

  void ExtraKeyElement(const ExtraKey& k) {
    switch (k.kind) {
      case ExtraKey::Kind::kText:
        return w_.Str(k.text);
      case ExtraKey::Kind::kInt:
        return w_.Int(k.number);
      case ExtraKey::Kind::kBytes:
        return w_.Bin(reinterpret_cast<const std::uint8_t*>(k.text.data()), k.text.size());
      case ExtraKey::Kind::kMm:
        w_.Array(2);
        w_.Str(k.text);
        return w_.Int(k.number);
      case ExtraKey::Kind::kOpaque:
        return w_.Raw(k.text);  // already msgpack: the bytes the decoder kept
    }
  }

  void Tokens(const std::vector<TokenId>& tokens) {
    w_.Array(tokens.size());
    for (TokenId t : tokens) w_.Uint(t);
  }

  void Stored(const BlockStored& e) {
    if (o_.events == EventLayout::kArray) return StoredArray(e);
    const bool extra = o_.extra_keys_nil_per_block || e.extra_keys.has_value();
    std::size_t n = 8 + (extra ? 1 : 0) + (e.group_idx ? 1 : 0) + (e.kv_cache_spec_kind ? 1 : 0) +
                    (e.kv_cache_spec_sliding_window ? 1 : 0);
    w_.Map(n);
    w_.Str("type");
    w_.Str(kTagStored);
    w_.Str("block_hashes");
    Hashes(e.block_hashes);
    w_.Str("parent_block_hash");
    e.parent_block_hash ? Hash(*e.parent_block_hash) : w_.Nil();
    w_.Str("token_ids");
    Tokens(e.token_ids);
    w_.Str("block_size");
    w_.Uint(e.block_size);
    w_.Str("lora_id");
    w_.OptionalInt(e.lora_id);
    w_.Str("medium");
    w_.OptionalStr(e.medium);
    w_.Str("lora_name");
    w_.OptionalStr(e.lora_name);
    if (extra) {
      w_.Str("extra_keys");
      ExtraKeys(e);
    }
    if (e.group_idx) {
      w_.Str("group_idx");
      w_.Int(*e.group_idx);
    }
    if (e.kv_cache_spec_kind) {
      w_.Str("kv_cache_spec_kind");
      w_.Str(*e.kv_cache_spec_kind);
    }
    if (e.kv_cache_spec_sliding_window) {
      w_.Str("kv_cache_spec_sliding_window");
      w_.Int(*e.kv_cache_spec_sliding_window);
    }
  }

  void StoredArray(const BlockStored& e) {
    const int n = stored_fields_;
    w_.Array(1 + static_cast<std::size_t>(n));
    w_.Str(kTagStored);
    Hashes(e.block_hashes);
    e.parent_block_hash ? Hash(*e.parent_block_hash) : w_.Nil();
    Tokens(e.token_ids);
    w_.Uint(e.block_size);
    w_.OptionalInt(e.lora_id);
    if (n >= kStoredFieldsMedium) w_.OptionalStr(e.medium);
    if (n >= kStoredFieldsLoraName) w_.OptionalStr(e.lora_name);
    if (n >= kStoredFieldsExtraKeys) ExtraKeys(e);
    if (n >= kStoredFieldsGroupIdx) w_.OptionalInt(e.group_idx);
    if (n >= kStoredFieldsGroupIdx + 1) w_.OptionalStr(e.kv_cache_spec_kind);
    if (n >= kStoredFieldsAll) w_.OptionalInt(e.kv_cache_spec_sliding_window);
  }

  void Removed(const BlockRemoved& e) {
    if (o_.events == EventLayout::kArray) {
      const bool medium = stored_fields_ >= kStoredFieldsMedium;
      const bool group = stored_fields_ >= kStoredFieldsGroupIdx;
      w_.Array(2 + (medium ? 1 : 0) + (group ? 1 : 0));
      w_.Str(kTagRemoved);
      Hashes(e.block_hashes);
      if (medium) w_.OptionalStr(e.medium);
      if (group) w_.OptionalInt(e.group_idx);
      return;
    }
    w_.Map(3 + (e.group_idx ? 1 : 0));
    w_.Str("type");
    w_.Str(kTagRemoved);
    w_.Str("block_hashes");
    Hashes(e.block_hashes);
    w_.Str("medium");
    w_.OptionalStr(e.medium);
    if (e.group_idx) {
      w_.Str("group_idx");
      w_.Int(*e.group_idx);
    }
  }

  void Cleared() {
    if (o_.events == EventLayout::kArray) {
      w_.Array(1);
    } else {
      w_.Map(1);
      w_.Str("type");
    }
    w_.Str(kTagCleared);
  }

  void Event(const KvEvent& event) {
    if (const auto* s = std::get_if<BlockStored>(&event)) return Stored(*s);
    if (const auto* r = std::get_if<BlockRemoved>(&event)) return Removed(*r);
    Cleared();
  }

 private:
  Writer& w_;
  const EncodeOptions& o_;
  int stored_fields_;
};

}  // namespace

void AppendEventBatch(const KvEventBatch& batch, const EncodeOptions& options,
                      std::vector<std::uint8_t>* out) {
  Writer w(out);
  EventWriter events(&w, options);
  auto write_events = [&] {
    w.Array(batch.events.size());
    for (const KvEvent& e : batch.events) events.Event(e);
  };
  switch (options.batch) {
    case BatchLayout::kArray:
      w.Array(3);
      w.Float64(batch.ts);
      write_events();
      w.OptionalInt(batch.data_parallel_rank);
      return;
    case BatchLayout::kArrayNoRank:
      w.Array(2);
      w.Float64(batch.ts);
      write_events();
      return;
    case BatchLayout::kMap:
      w.Map(batch.data_parallel_rank ? 3 : 2);
      w.Str("ts");
      w.Float64(batch.ts);
      w.Str("events");
      write_events();
      if (batch.data_parallel_rank) {
        w.Str("data_parallel_rank");
        w.Int(*batch.data_parallel_rank);
      }
      return;
  }
}

std::vector<std::uint8_t> EncodeEventBatch(const KvEventBatch& batch,
                                           const EncodeOptions& options) {
  std::vector<std::uint8_t> out;
  out.reserve(64 + 16 * batch.events.size());
  AppendEventBatch(batch, options, &out);
  return out;
}

}  // namespace kvroute::kv
