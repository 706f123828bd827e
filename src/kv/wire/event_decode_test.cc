// Decoder tests: every envelope generation of vllm-protocol.md §1.6 built by hand (not by our
// encoder), and a malformed corpus that must be rejected without crashing.
#include "kv/wire/event_decode.h"

#include <gtest/gtest.h>

#include <bit>
#include <limits>
#include <string>
#include <string_view>

namespace kvroute::kv {
namespace {

// Hand-written msgpack: each method writes exactly the form its name says, so tests can use
// non-minimal forms (int64 for small values, str8 for short strings) as other encoders may.
class Mp {
 public:
  Mp& Arr(std::uint32_t n) { return n < 16 ? B(0x90 | n) : Be(0xdc, n, 2); }
  Mp& Arr32(std::uint32_t n) { return Be(0xdd, n, 4); }
  Mp& Map(std::uint32_t n) { return n < 16 ? B(0x80 | n) : Be(0xde, n, 2); }
  Mp& Map32(std::uint32_t n) { return Be(0xdf, n, 4); }
  Mp& Nil() { return B(0xc0); }
  Mp& Fix(std::uint8_t v) { return B(v); }  // positive fixint
  Mp& U64(std::uint64_t v) { return Be(0xcf, v, 8); }
  Mp& I64(std::int64_t v) { return Be(0xd3, static_cast<std::uint64_t>(v), 8); }
  Mp& I8(std::int8_t v) { return Be(0xd0, static_cast<std::uint8_t>(v), 1); }
  Mp& F64(double v) { return Be(0xcb, std::bit_cast<std::uint64_t>(v), 8); }
  Mp& F32(float v) { return Be(0xca, std::bit_cast<std::uint32_t>(v), 4); }
  Mp& S(std::string_view s) {
    s.size() < 32 ? B(0xa0 | static_cast<std::uint8_t>(s.size()))
                  : Be(0xd9, static_cast<std::uint8_t>(s.size()), 1);
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  Mp& Bin(std::string_view hex) {
    std::vector<std::uint8_t> raw;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
      raw.push_back(
          static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
    }
    Be(0xc4, raw.size(), 1);
    bytes.insert(bytes.end(), raw.begin(), raw.end());
    return *this;
  }
  Mp& B(std::uint8_t b) {
    bytes.push_back(b);
    return *this;
  }
  Mp& Be(std::uint8_t head, std::uint64_t v, int n) {
    B(head);
    for (int i = n - 1; i >= 0; --i) B(static_cast<std::uint8_t>(v >> (8 * i)));
    return *this;
  }
  Mp& Tokens(int n) {  // token ids 1..n as fixints
    Arr(static_cast<std::uint32_t>(n));
    for (int i = 1; i <= n; ++i) Fix(static_cast<std::uint8_t>(i));
    return *this;
  }

  std::vector<std::uint8_t> bytes;
};

DecodeStatus Decode(const Mp& mp, KvEventBatch* out, DecodeInfo* info = nullptr) {
  return DecodeEventBatch(mp.bytes.data(), mp.bytes.size(), out, info);
}

KvEventBatch MustDecode(const Mp& mp) {
  KvEventBatch out;
  DecodeStatus st = Decode(mp, &out);
  EXPECT_TRUE(st.ok()) << DecodeErrorName(st.error) << " at " << st.offset << ": " << st.detail;
  return out;
}

DecodeError ErrorOf(const std::vector<std::uint8_t>& bytes) {
  KvEventBatch out;
  return DecodeEventBatch(bytes.data(), bytes.size(), &out).error;
}

const BlockStored& Stored(const KvEventBatch& b, std::size_t i = 0) {
  return std::get<BlockStored>(b.events.at(i));
}

TEST(EventDecodeGenerationsTest, V090TwoElementBatchWithSixElementBlockStored) {
  Mp mp;
  mp.Arr(2).F64(1.5).Arr(2);
  mp.Arr(6).S("BlockStored").Arr(1).U64(7).Nil().Tokens(4).Fix(4).Nil();
  mp.Arr(2).S("BlockRemoved").Arr(1).U64(7);
  KvEventBatch b = MustDecode(mp);
  EXPECT_EQ(b.ts, 1.5);
  EXPECT_FALSE(b.data_parallel_rank.has_value());
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(Stored(b).block_hashes, std::vector<EngineHash>{7});
  EXPECT_EQ(Stored(b).token_ids, (std::vector<TokenId>{1, 2, 3, 4}));
  EXPECT_EQ(Stored(b).block_size, 4u);
  EXPECT_FALSE(Stored(b).medium.has_value());
  EXPECT_EQ(std::get<BlockRemoved>(b.events[1]).block_hashes, std::vector<EngineHash>{7});
}

TEST(EventDecodeGenerationsTest, ThreeElementBatchWithMediumAndLoraName) {
  Mp mp;
  mp.Arr(3).F64(2.0).Arr(1);
  mp.Arr(8).S("BlockStored").Arr(1).Fix(9).Fix(8).Tokens(2).Fix(2).I64(3).S("CPU").S("adapter");
  mp.Fix(5);
  KvEventBatch b = MustDecode(mp);
  EXPECT_EQ(b.data_parallel_rank, 5);
  EXPECT_EQ(Stored(b).parent_block_hash, 8u);
  EXPECT_EQ(Stored(b).lora_id, 3);
  EXPECT_EQ(Stored(b).medium, "CPU");
  EXPECT_EQ(Stored(b).lora_name, "adapter");
}

TEST(EventDecodeGenerationsTest, TwelveElementArrayEventKeepsEveryKnownField) {
  Mp mp;
  mp.Arr(3).F64(0).Arr(1);
  mp.Arr(12).S("BlockStored").Arr(1).Fix(1).Nil().Tokens(1).Fix(1).Nil().S("GPU").Nil();
  mp.Arr(1).Nil().Fix(2).S("sliding_window").I64(4096);
  mp.Nil();
  const KvEventBatch b = MustDecode(mp);
  const BlockStored& s = Stored(b);
  EXPECT_EQ(s.group_idx, 2);
  EXPECT_EQ(s.kv_cache_spec_kind, "sliding_window");
  EXPECT_EQ(s.kv_cache_spec_sliding_window, 4096);
}

TEST(EventDecodeGenerationsTest, UnknownTrailingArrayElementsAreIgnored) {
  Mp mp;
  mp.Arr(4).F64(0).Arr(2);
  mp.Arr(14).S("BlockStored").Arr(1).Fix(1).Nil().Tokens(1).Fix(1).Nil().S("GPU").Nil();
  mp.Nil().Fix(0).Nil().Nil().S("locality-x").Map(1).S("k").Arr(2).Fix(1).Fix(2);
  mp.Arr(5).S("BlockRemoved").Arr(1).Fix(1).S("GPU").Fix(0).S("future");
  mp.Fix(0).S("future batch field");
  KvEventBatch b = MustDecode(mp);
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(std::get<BlockRemoved>(b.events[1]).group_idx, 0);
}

TEST(EventDecodeGenerationsTest, MapEventsAreSelectedByKeyInAnyOrder) {
  Mp mp;
  mp.Arr(3).F64(0).Arr(2);
  mp.Map(6).S("token_ids").Tokens(2).S("unknown_key").Map(1).S("x").Arr(0);
  mp.S("block_size").Fix(2).S("block_hashes").Arr(1).Fix(3).S("type").S("BlockStored");
  mp.S("medium").Nil();
  mp.Map(2).S("block_hashes").Arr(0).S("type").S("BlockRemoved");
  mp.Nil();
  KvEventBatch b = MustDecode(mp);
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(Stored(b).block_hashes, std::vector<EngineHash>{3});
  EXPECT_FALSE(Stored(b).parent_block_hash.has_value());
  EXPECT_FALSE(std::get<BlockRemoved>(b.events[1]).medium.has_value());
}

TEST(EventDecodeGenerationsTest, ExtraKeysAreKeptAsVllmBuiltThem) {
  // Map event (vLLM main) with two blocks: block 0 (adapter, an image that starts 4 tokens
  // in, the salt) and block 1 (adapter, the same image from 12 tokens before the block, and a
  // prompt-embeds digest); a [text, float] pair is of no known shape and kept opaque.
  Mp mp;
  mp.Arr(3).F64(0).Arr(1);
  mp.Map(5).S("type").S("BlockStored").S("block_hashes").Arr(2).Fix(1).Fix(2);
  mp.S("token_ids").Tokens(4).S("block_size").Fix(2).S("extra_keys").Arr(2);
  mp.Arr(3).S("sql-lora").Arr(2).S("img").Fix(4).S("tenant-a");
  mp.Arr(4).S("sql-lora").Arr(2).S("img").I8(-12).Bin("abcd").Arr(2).S("x").F64(1.5);
  mp.Nil();
  const KvEventBatch b = MustDecode(mp);
  const BlockStored& s = Stored(b);
  ASSERT_TRUE(s.extra_keys.has_value());
  ASSERT_EQ(s.extra_keys->size(), 2u);
  EXPECT_EQ((*s.extra_keys)[0], (BlockExtraKeys{ExtraKey::Text("sql-lora"), ExtraKey::Mm("img", 4),
                                                ExtraKey::Text("tenant-a")}));
  const BlockExtraKeys& b1 = (*s.extra_keys)[1];
  ASSERT_EQ(b1.size(), 4u);
  EXPECT_EQ(b1[1], ExtraKey::Mm("img", -12));
  EXPECT_EQ(b1[2], (ExtraKey{ExtraKey::Kind::kBytes, "\xab\xcd", 0}));
  EXPECT_EQ(b1[3].kind, ExtraKey::Kind::kOpaque);
  EXPECT_EQ(b1[3].text.size(), 1u + 2u + 9u);  // the raw [str "x", float64]
}

TEST(EventDecodeGenerationsTest, ExtraKeysNilOrNilPerBlockAreTwoAnswers) {
  // None: the event cannot say (nullopt). [None, None]: no block has extra keys.
  for (bool per_block : {false, true}) {
    Mp mp;
    mp.Arr(3).F64(0).Arr(1);
    mp.Arr(9).S("BlockStored").Arr(2).Fix(1).Fix(2).Nil().Tokens(4).Fix(2).Nil().S("GPU").Nil();
    per_block ? mp.Arr(2).Nil().Nil() : mp.Nil();
    mp.Nil();
    const KvEventBatch b = MustDecode(mp);
    const BlockStored& s = Stored(b);
    EXPECT_EQ(s.extra_keys.has_value(), per_block);
    if (per_block) {
      EXPECT_EQ(s.extra_keys->size(), 2u);
    }
  }
}

TEST(EventDecodeGenerationsTest, MapBatchWithAnyKeyOrder) {
  Mp mp;
  mp.Map(4).S("events").Arr(1).Map(1).S("type").S("AllBlocksCleared");
  mp.S("extra").Arr(1).Nil().S("data_parallel_rank").Fix(3).S("ts").F64(9.25);
  KvEventBatch b = MustDecode(mp);
  EXPECT_EQ(b.ts, 9.25);
  EXPECT_EQ(b.data_parallel_rank, 3);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(b.events[0]));
}

TEST(EventDecodeGenerationsTest, HashesAsInt64Uint64AndBin) {
  Mp mp;
  mp.Arr(3).F64(0).Arr(1);
  mp.Arr(2).S("BlockRemoved").Arr(5).I64(-2).U64(0xfedcba9876543210ULL).I8(5);
  mp.Bin("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff").Bin("0102");
  mp.Nil();
  auto hashes = std::get<BlockRemoved>(MustDecode(mp).events[0]).block_hashes;
  EXPECT_EQ(hashes, (std::vector<EngineHash>{0xfffffffffffffffeULL, 0xfedcba9876543210ULL, 5,
                                             0x8899aabbccddeeffULL, 0x0102}));
}

TEST(EventDecodeGenerationsTest, BigramTokenPairsKeepTheFirstToken) {
  Mp mp;
  mp.Arr(3).F64(0).Arr(1);
  mp.Arr(6).S("BlockStored").Arr(1).Fix(1).Nil().Arr(2);
  mp.Arr(2).Fix(10).Fix(11).Arr(2).Fix(11).Fix(12);
  mp.Fix(2).Nil().Nil();
  EXPECT_EQ(Stored(MustDecode(mp)).token_ids, (std::vector<TokenId>{10, 11}));
}

TEST(EventDecodeGenerationsTest, TimestampMayBeFloat32OrInt) {
  Mp f32;
  f32.Arr(2).F32(0.25f).Arr(0);
  EXPECT_EQ(MustDecode(f32).ts, 0.25);
  Mp integer;
  integer.Arr(2).Fix(7).Arr(0);
  EXPECT_EQ(MustDecode(integer).ts, 7.0);
}

TEST(EventDecodeGenerationsTest, UnknownEventTypesAreSkippedAndCounted) {
  Mp mp;
  mp.Arr(3).F64(0).Arr(3);
  mp.Arr(3).S("BlockMoved").Arr(1).Fix(1).Map(1).S("a").Arr(1).Nil();
  mp.Map(2).S("type").S("SomethingNew").S("x").Fix(1);
  mp.Arr(1).S("AllBlocksCleared");
  mp.Nil();
  KvEventBatch out;
  DecodeInfo info;
  ASSERT_TRUE(Decode(mp, &out, &info).ok());
  EXPECT_EQ(info.unknown_events, 2u);
  ASSERT_EQ(out.events.size(), 1u);
}

// ---- malformed input ------------------------------------------------------------------------

std::vector<std::uint8_t> ValidPayload() {
  Mp mp;
  mp.Arr(3).F64(1.0).Arr(2);
  mp.Arr(8).S("BlockStored").Arr(1).U64(0x1234567890abcdefULL).Nil().Tokens(16).Fix(16).Nil();
  mp.S("GPU").S("lora");
  mp.Map(3).S("type").S("BlockRemoved").S("block_hashes").Arr(1).Fix(1).S("medium").Nil();
  mp.Fix(0);
  return mp.bytes;
}

TEST(EventDecodeMalformedTest, EveryTruncationIsAnError) {
  const auto full = ValidPayload();
  for (std::size_t n = 0; n < full.size(); ++n) {
    std::vector<std::uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    DecodeError e = ErrorOf(cut);
    EXPECT_NE(e, DecodeError::kOk) << "prefix of " << n << " bytes";
  }
  EXPECT_EQ(ErrorOf(full), DecodeError::kOk);
}

TEST(EventDecodeMalformedTest, TrailingBytesAreAnError) {
  auto bytes = ValidPayload();
  bytes.push_back(0xc0);
  EXPECT_EQ(ErrorOf(bytes), DecodeError::kTrailingBytes);
}

TEST(EventDecodeMalformedTest, HugeLengthPrefixesAreRejectedBeforeAllocating) {
  EXPECT_EQ(ErrorOf(Mp().Arr32(0xffffffff).bytes), DecodeError::kTooLarge);
  EXPECT_EQ(ErrorOf(Mp().Map32(0x80000000).bytes), DecodeError::kTooLarge);
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr32(1000000).Nil().bytes), DecodeError::kTooLarge);
  // str32 claiming 4 GiB.
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr(1).Arr(1).Be(0xdb, 0xffffffff, 4).bytes),
            DecodeError::kTooLarge);
}

TEST(EventDecodeMalformedTest, DeepNestingInSkippedValuesIsAnError) {
  // The fourth batch element is unknown, so the decoder skips it without a schema.
  Mp mp;
  mp.Arr(4).F64(0).Arr(0).Nil();
  for (int i = 0; i < 10000; ++i) mp.Arr(1);
  mp.Nil();
  EXPECT_EQ(ErrorOf(mp.bytes), DecodeError::kTooDeep);
  Mp shallow;
  shallow.Arr(4).F64(0).Arr(0).Nil();
  for (int i = 0; i < 8; ++i) shallow.Arr(1);
  shallow.Nil();
  EXPECT_EQ(ErrorOf(shallow.bytes), DecodeError::kOk);
}

TEST(EventDecodeMalformedTest, WrongTypesAreRejected) {
  EXPECT_EQ(ErrorOf(Mp().Nil().bytes), DecodeError::kUnexpectedType);
  EXPECT_EQ(ErrorOf(Mp().Arr(2).S("ts").Arr(0).bytes), DecodeError::kUnexpectedType);
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Map(0).bytes), DecodeError::kUnexpectedType);
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr(1).Fix(3).bytes), DecodeError::kUnexpectedType);
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr(1).Arr(2).Fix(1).Arr(0).bytes),
            DecodeError::kUnexpectedType);  // tag is not a string
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr(1).Arr(2).S("BlockRemoved").S("h").bytes),
            DecodeError::kUnexpectedType);  // hashes not a list
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr(1).Arr(2).S("BlockRemoved").Arr(1).F64(1).bytes),
            DecodeError::kUnexpectedType);  // hash is a float
  EXPECT_EQ(ErrorOf(Mp().Arr(3).F64(0).Arr(0).S("rank").bytes), DecodeError::kUnexpectedType);
  EXPECT_EQ(ErrorOf(Mp().Map(1).Fix(1).Nil().bytes), DecodeError::kUnexpectedType);
}

TEST(EventDecodeMalformedTest, MissingFieldsAreRejected) {
  EXPECT_EQ(ErrorOf(Mp().Arr(1).F64(0).bytes), DecodeError::kMissingField);
  EXPECT_EQ(ErrorOf(Mp().Map(1).S("ts").F64(0).bytes), DecodeError::kMissingField);
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr(1).Arr(0).bytes), DecodeError::kMissingField);
  // BlockStored with 4 fields: shorter than the first generation.
  EXPECT_EQ(
      ErrorOf(Mp().Arr(2).F64(0).Arr(1).Arr(5).S("BlockStored").Arr(0).Nil().Arr(0).Fix(1).bytes),
      DecodeError::kMissingField);
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr(1).Arr(1).S("BlockRemoved").bytes),
            DecodeError::kMissingField);
  // Map event without "type", and BlockStored map without token_ids.
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr(1).Map(1).S("block_hashes").Arr(0).bytes),
            DecodeError::kMissingField);
  EXPECT_EQ(ErrorOf(Mp().Arr(2)
                        .F64(0)
                        .Arr(1)
                        .Map(3)
                        .S("type")
                        .S("BlockStored")
                        .S("block_hashes")
                        .Arr(0)
                        .S("block_size")
                        .Fix(1)
                        .bytes),
            DecodeError::kMissingField);
}

TEST(EventDecodeMalformedTest, OutOfRangeValuesAreRejected) {
  auto stored = [](auto&& tokens_and_size) {
    Mp mp;
    mp.Arr(2).F64(0).Arr(1).Arr(6).S("BlockStored").Arr(0).Nil();
    tokens_and_size(mp);
    mp.Nil();
    return mp.bytes;
  };
  EXPECT_EQ(ErrorOf(stored([](Mp& m) { m.Arr(1).U64(1ULL << 32).Fix(1); })),
            DecodeError::kInvalidValue);  // token id beyond 32 bits
  EXPECT_EQ(ErrorOf(stored([](Mp& m) { m.Arr(1).I8(-1).Fix(1); })), DecodeError::kInvalidValue);
  EXPECT_EQ(ErrorOf(stored([](Mp& m) { m.Arr(0).Fix(0); })), DecodeError::kInvalidValue);
  EXPECT_EQ(ErrorOf(stored([](Mp& m) { m.Arr(1).Arr(0).Fix(1); })), DecodeError::kInvalidValue);
  EXPECT_EQ(ErrorOf(Mp().Arr(3).F64(0).Arr(0).U64(1ULL << 63).bytes), DecodeError::kInvalidValue);
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr(1).Arr(2).S("BlockRemoved").Arr(1).B(0xc4).B(0).bytes),
            DecodeError::kInvalidValue);  // empty bin hash
}

TEST(EventDecodeMalformedTest, NonFiniteTimestampIsRejected) {
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(std::numeric_limits<double>::quiet_NaN()).Arr(0).bytes),
            DecodeError::kInvalidValue);
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(std::numeric_limits<double>::infinity()).Arr(0).bytes),
            DecodeError::kInvalidValue);
}

TEST(EventDecodeMalformedTest, ReservedByteIsAnError) {
  EXPECT_EQ(ErrorOf(Mp().Arr(2).F64(0).Arr(1).B(0xc1).bytes), DecodeError::kBadMsgpack);
}

TEST(EventDecodeMalformedTest, ErrorReportsTheOffsetWhereItWasNoticed) {
  Mp mp;
  mp.Arr(2).F64(0).Arr(1).B(0xc1);
  KvEventBatch out;
  DecodeStatus st = Decode(mp, &out);
  EXPECT_EQ(st.offset, 11u);  // the c1 after 92, cb<8>, 91
  EXPECT_STREQ(st.detail, "event");
}

TEST(EventDecodeMalformedTest, EmptyInputIsTruncated) {
  KvEventBatch out;
  EXPECT_EQ(DecodeEventBatch(nullptr, 0, &out).error, DecodeError::kTruncated);
}

}  // namespace
}  // namespace kvroute::kv
