// Encoder tests: byte-for-byte against the golden payloads of
// shared/reference/vllm-protocol.md §7, msgspec's integer/float forms, and encode→decode
// round trips over random batches in every layout.
#include "kv/wire/event_encode.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "kv/wire/event_decode.h"

namespace kvroute::kv {
namespace {

constexpr EngineHash kH1 = 3236607068019569386ULL;  // 0x2ceabcfae6d332ea

std::string Hex(const std::vector<std::uint8_t>& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (std::uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

BlockStored GoldenStored() {
  BlockStored s;
  s.block_hashes = {kH1};
  for (TokenId t = 1; t <= 16; ++t) s.token_ids.push_back(t);
  s.block_size = 16;
  s.medium = "GPU";
  return s;
}

KvEventBatch Batch(double ts, KvEvent event) {
  KvEventBatch b;
  b.ts = ts;
  b.events.push_back(std::move(event));
  b.data_parallel_rank = 0;
  return b;
}

EncodeOptions ArrayGeneration(int stored_fields) {
  EncodeOptions o;
  o.events = EventLayout::kArray;
  o.array_stored_fields = stored_fields;
  return o;
}

TEST(EventEncodeGoldenTest, ArrayBlockStoredV011MatchesGoldenBytes) {
  auto bytes =
      EncodeEventBatch(Batch(1700000000.5, GoldenStored()), ArrayGeneration(kStoredFieldsMedium));
  EXPECT_EQ(Hex(bytes),
            "93cb41d954fc402000009197ab426c6f636b53746f72656491cf2ceabcfae6d332eac0dc001001020304"
            "05060708090a0b0c0d0e0f1010c0a347505500");
  EXPECT_EQ(bytes.size(), 61u);
}

TEST(EventEncodeGoldenTest, MapBlockStoredCurrentMainMatchesGoldenBytes) {
  BlockStored s = GoldenStored();
  s.group_idx = 0;
  s.kv_cache_spec_kind = "full_attention";
  auto bytes = EncodeEventBatch(Batch(1700000000.5, s));  // defaults: vLLM main
  EXPECT_EQ(Hex(bytes),
            "93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f686173686573"
            "91cf2ceabcfae6d332eab1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473dc0010"
            "0102030405060708090a0b0c0d0e0f10aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469"
            "756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797391c0a967726f75705f69647800b2"
            "6b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00");
  EXPECT_EQ(bytes.size(), 202u);
}

TEST(EventEncodeGoldenTest, ArrayBlockRemovedMatchesGoldenBytes) {
  BlockRemoved r{.block_hashes = {kH1}, .medium = "GPU", .group_idx = std::nullopt};
  auto bytes = EncodeEventBatch(Batch(1700000001.0, r), ArrayGeneration(kStoredFieldsMedium));
  EXPECT_EQ(Hex(bytes),
            "93cb41d954fc404000009193ac426c6f636b52656d6f76656491cf2ceabcfae6d332eaa3"
            "47505500");
}

TEST(EventEncodeGoldenTest, MapBlockRemovedMatchesGoldenBytes) {
  BlockRemoved r{.block_hashes = {kH1}, .medium = "GPU", .group_idx = 0};
  auto bytes = EncodeEventBatch(Batch(1700000001.0, r));
  EXPECT_EQ(Hex(bytes),
            "93cb41d954fc404000009184a474797065ac426c6f636b52656d6f766564ac626c6f636b5f6861736865"
            "7391cf2ceabcfae6d332eaa66d656469756da3475055a967726f75705f6964780000");
}

TEST(EventEncodeGoldenTest, AllBlocksClearedMatchesGoldenBytesInBothLayouts) {
  auto batch = Batch(1700000002.0, AllBlocksCleared{});
  EXPECT_EQ(Hex(EncodeEventBatch(batch, ArrayGeneration(kStoredFieldsAll))),
            "93cb41d954fc408000009191b0416c6c426c6f636b73436c656172656400");
  EXPECT_EQ(Hex(EncodeEventBatch(batch)),
            "93cb41d954fc408000009181a474797065b0416c6c426c6f636b73436c656172656400");
}

TEST(EventEncodeTest, ArrayEventsCarryEveryFieldOfTheirGeneration) {
  // msgspec's omit_defaults does not shorten array_like structs: all 11 fields, nil for None.
  auto bytes = EncodeEventBatch(Batch(0, GoldenStored()), ArrayGeneration(kStoredFieldsAll));
  // 93 cb<8> 91 9c: the event is a 12-element array.
  ASSERT_GT(bytes.size(), 12u);
  EXPECT_EQ(bytes[11], 0x9c);
}

TEST(EventEncodeTest, BatchWithoutRankOmitsTheThirdElementOnlyInOldLayout) {
  KvEventBatch b{.ts = 1.0, .events = {}, .data_parallel_rank = std::nullopt};
  EncodeOptions old;
  old.batch = BatchLayout::kArrayNoRank;
  EXPECT_EQ(Hex(EncodeEventBatch(b, old)), "92cb3ff000000000000090");
  EXPECT_EQ(Hex(EncodeEventBatch(b)), "93cb3ff000000000000090c0");
  EncodeOptions map;
  map.batch = BatchLayout::kMap;
  EXPECT_EQ(Hex(EncodeEventBatch(b, map)), "82a27473cb3ff0000000000000a66576656e747390");
}

TEST(EventEncodeTest, TimestampIsAlwaysFloat64EvenWhenFloat32IsExact) {
  KvEventBatch b{.ts = 0.5, .events = {}, .data_parallel_rank = 1};
  EXPECT_EQ(Hex(EncodeEventBatch(b)), "93cb3fe00000000000009001");
}

TEST(EventEncodeTest, IntegersUseTheSmallestFormIncludingNegativeBoundaries) {
  struct Case {
    std::int64_t value;
    const char* hex;
  };
  const Case cases[] = {
      {0, "00"},
      {127, "7f"},
      {128, "cc80"},
      {256, "cd0100"},
      {65536, "ce00010000"},
      {4294967296LL, "cf0000000100000000"},
      {-1, "ff"},
      {-32, "e0"},
      {-33, "d0df"},
      {-128, "d080"},
      {-129, "d1ff7f"},
      {-32768, "d18000"},
      {-32769, "d2ffff7fff"},
      {-2147483648LL, "d280000000"},
      {-2147483649LL, "d3ffffffff7fffffff"},
      {-8589934592LL + 0x90000000LL, "d3fffffffe90000000"},
  };
  for (const Case& c : cases) {
    KvEventBatch b{.ts = 0, .events = {}, .data_parallel_rank = c.value};
    std::string hex = Hex(EncodeEventBatch(b));
    EXPECT_EQ(hex.substr(22), c.hex) << c.value;  // after 93 cb<8> 90
  }
}

TEST(EventEncodeTest, HashFormsWriteUnsignedSignedOrBin) {
  BlockRemoved r{
      .block_hashes = {0xfffffffffffffffeULL}, .medium = std::nullopt, .group_idx = std::nullopt};
  KvEventBatch b = Batch(0, r);
  EncodeOptions o = ArrayGeneration(kStoredFieldsV090);
  o.hashes = HashForm::kUnsigned;
  EXPECT_NE(Hex(EncodeEventBatch(b, o)).find("91cffffffffffffffffe"), std::string::npos);
  o.hashes = HashForm::kSigned;
  EXPECT_NE(Hex(EncodeEventBatch(b, o)).find("91fe"), std::string::npos);
  o.hashes = HashForm::kBin8;
  EXPECT_NE(Hex(EncodeEventBatch(b, o)).find("91c408fffffffffffffffe"), std::string::npos);
}

// Random batches with every field populated at random.
class RoundTripTest : public ::testing::TestWithParam<int> {};

std::optional<std::string> MaybeStr(std::mt19937_64& rng, std::size_t max_len) {
  if (rng() % 3 == 0) return std::nullopt;
  std::string s(rng() % (max_len + 1), 'x');
  for (char& c : s) c = static_cast<char>('a' + rng() % 26);
  return s;
}

std::optional<std::int64_t> MaybeInt(std::mt19937_64& rng) {
  if (rng() % 3 == 0) return std::nullopt;
  return static_cast<std::int64_t>(rng()) >> (rng() % 64);
}

KvEventBatch RandomBatch(std::mt19937_64& rng) {
  KvEventBatch b;
  b.ts = static_cast<double>(rng() % 2000000000) + static_cast<double>(rng() % 1000) / 1024.0;
  b.data_parallel_rank = MaybeInt(rng);
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) {
    switch (rng() % 3) {
      case 0: {
        BlockStored s;
        const int blocks = static_cast<int>(rng() % 4);
        s.block_size = 1 + static_cast<std::uint32_t>(rng() % 20);
        for (int k = 0; k < blocks; ++k) s.block_hashes.push_back(rng() >> (rng() % 64));
        for (std::uint32_t k = 0; k < blocks * s.block_size; ++k) {
          s.token_ids.push_back(static_cast<TokenId>(rng() >> (32 + rng() % 32)));
        }
        if (rng() % 2) s.parent_block_hash = rng();
        s.lora_id = MaybeInt(rng);
        s.medium = MaybeStr(rng, 40);
        s.lora_name = MaybeStr(rng, 300);
        s.group_idx = MaybeInt(rng);
        s.kv_cache_spec_kind = MaybeStr(rng, 20);
        s.kv_cache_spec_sliding_window = MaybeInt(rng);
        if (rng() % 2) {
          // Tuples of every shape vLLM sends: text, int, bytes, (identifier, offset).
          s.extra_keys.emplace();
          for (int k = 0; k < blocks; ++k) {
            BlockExtraKeys& keys = s.extra_keys->emplace_back();
            for (int e = 0, m = static_cast<int>(rng() % 4); e < m; ++e) {
              switch (rng() % 4) {
                case 0:
                  keys.push_back(ExtraKey::Text(MaybeStr(rng, 30).value_or("")));
                  break;
                case 1:
                  keys.push_back({ExtraKey::Kind::kInt, {}, MaybeInt(rng).value_or(-5)});
                  break;
                case 2:
                  keys.push_back({ExtraKey::Kind::kBytes, std::string(rng() % 33, '\xab'), 0});
                  break;
                default:
                  keys.push_back(
                      ExtraKey::Mm("img", static_cast<std::int64_t>(rng() % 2000) - 1000));
              }
            }
          }
        }
        b.events.emplace_back(std::move(s));
        break;
      }
      case 1: {
        BlockRemoved r;
        for (int k = 0, m = static_cast<int>(rng() % 3); k < m; ++k)
          r.block_hashes.push_back(rng());
        r.medium = MaybeStr(rng, 8);
        r.group_idx = MaybeInt(rng);
        b.events.emplace_back(std::move(r));
        break;
      }
      default:
        b.events.emplace_back(AllBlocksCleared{});
    }
  }
  return b;
}

TEST_P(RoundTripTest, DecodeInvertsEncodeInEveryFullLayout) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(GetParam()));
  for (int iter = 0; iter < 200; ++iter) {
    KvEventBatch batch = RandomBatch(rng);
    for (EventLayout events : {EventLayout::kArray, EventLayout::kMap}) {
      for (BatchLayout layout : {BatchLayout::kArray, BatchLayout::kMap}) {
        for (HashForm hashes : {HashForm::kUnsigned, HashForm::kSigned, HashForm::kBin8}) {
          EncodeOptions o{.events = events,
                          .batch = layout,
                          .hashes = hashes,
                          .array_stored_fields = kStoredFieldsAll,
                          .extra_keys_nil_per_block = (rng() % 2) == 0};
          auto bytes = EncodeEventBatch(batch, o);
          KvEventBatch decoded;
          DecodeStatus st = DecodeEventBatch(bytes.data(), bytes.size(), &decoded);
          ASSERT_TRUE(st.ok()) << DecodeErrorName(st.error) << " at " << st.offset << " "
                               << st.detail;
          // vLLM's [None] * n says every block has no extra keys: that is what comes back.
          KvEventBatch want = batch;
          for (KvEvent& e : want.events) {
            auto* s = std::get_if<BlockStored>(&e);
            if (s != nullptr && !s->extra_keys && o.extra_keys_nil_per_block) {
              s->extra_keys.emplace(s->block_hashes.size());
            }
          }
          EXPECT_EQ(decoded, want) << "iter " << iter;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RoundTripTest, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace kvroute::kv
