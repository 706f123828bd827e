#include "kv/keys/vllm_hash.h"

#include <cbor.h>
#include <gtest/gtest.h>

#include <numeric>

namespace kvroute::kv {
namespace {

// Event ints (low 64 bits) of salted, adapter and image blocks, seed "0", tokens 1..32. The
// reference gives goldens only without extra keys (above); these were computed with an
// independent canonical-CBOR encoder in Python (hashlib.sha256 over the same 3-tuples, e.g.
// (NONE_HASH, (1..16), ("tenant-a",)) and (h0, (17..32), (("img", -12),))), and agree with
// this encoder, whose bytes the libcbor oracle above checks.
constexpr std::uint64_t kSaltedBlock0 = 10934782661253773923ULL;
constexpr std::uint64_t kAdapterBlock1 = 16635231296578028692ULL;
constexpr std::uint64_t kImageBlock1 = 5287019225256986704ULL;

std::vector<TokenId> Iota(std::size_t n, TokenId start) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Golden vectors from shared/reference/vllm-protocol.md §2.1 (seed "0", block 16).
TEST(VllmHashTest, NoneHashMatchesGolden) {
  EXPECT_EQ(VllmNoneHash("0").Hex(),
            "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e");
}

TEST(VllmHashTest, ChainedBlockHashesMatchGolden) {
  auto tokens = Iota(32, 1);
  auto hashes = VllmBlockHashes(tokens, 16, VllmNoneHash("0"));
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[0].Low64(), 3236607068019569386ULL);
  EXPECT_EQ(hashes[0].Hex().substr(0, 8), "202da172");
  EXPECT_EQ(hashes[1].Low64(), 2758186210834249151ULL);
  EXPECT_EQ(hashes[1].Hex().substr(0, 8), "4a0a3938");
}

// Independent oracle for our hand-written canonical CBOR: libcbor builds the same item and
// serialises it; both byte strings must be identical (token values cover every head width).
TEST(VllmHashTest, CborInputMatchesLibcbor) {
  std::vector<TokenId> tokens = {0, 23, 24, 255, 256, 65535, 65536, 151643, 4294967295u};
  Sha256Digest parent = VllmNoneHash("42");
  // Every element shape vLLM puts in a tuple: the LoRA name, two multimodal items (one that
  // began in an earlier block: a negative offset), the salt, and bytes (prompt embeds).
  BlockExtraKeys extras = {ExtraKey::Text("my-lora"), ExtraKey::Mm("img-a", -300),
                           ExtraKey::Mm("img-b", 70000), ExtraKey::Text(std::string(30, 's')),
                           ExtraKey{ExtraKey::Kind::kBytes, std::string(32, '\x7f'), 0}};
  auto ours = VllmBlockHashInput(parent, tokens, extras);

  auto build_uint = [](std::uint64_t v) -> cbor_item_t* {
    if (v <= 0xff) return cbor_build_uint8(static_cast<std::uint8_t>(v));
    if (v <= 0xffff) return cbor_build_uint16(static_cast<std::uint16_t>(v));
    if (v <= 0xffffffffULL) return cbor_build_uint32(static_cast<std::uint32_t>(v));
    return cbor_build_uint64(v);
  };
  cbor_item_t* root = cbor_new_definite_array(3);
  ASSERT_TRUE(cbor_array_push(root, cbor_move(cbor_build_bytestring(parent.bytes.data(), 32))));
  cbor_item_t* toks = cbor_new_definite_array(tokens.size());
  for (auto t : tokens) ASSERT_TRUE(cbor_array_push(toks, cbor_move(build_uint(t))));
  ASSERT_TRUE(cbor_array_push(root, cbor_move(toks)));
  auto build_int = [&](std::int64_t v) -> cbor_item_t* {
    if (v >= 0) return build_uint(static_cast<std::uint64_t>(v));
    cbor_item_t* n = build_uint(static_cast<std::uint64_t>(-(v + 1)));
    cbor_mark_negint(n);
    return n;
  };
  cbor_item_t* ex = cbor_new_definite_array(extras.size());
  for (const ExtraKey& e : extras) {
    cbor_item_t* item = nullptr;
    switch (e.kind) {
      case ExtraKey::Kind::kText:
        item = cbor_build_stringn(e.text.data(), e.text.size());
        break;
      case ExtraKey::Kind::kBytes:
        item = cbor_build_bytestring(reinterpret_cast<const unsigned char*>(e.text.data()),
                                     e.text.size());
        break;
      case ExtraKey::Kind::kMm:
        item = cbor_new_definite_array(2);
        ASSERT_TRUE(
            cbor_array_push(item, cbor_move(cbor_build_stringn(e.text.data(), e.text.size()))));
        ASSERT_TRUE(cbor_array_push(item, cbor_move(build_int(e.number))));
        break;
      default:
        FAIL() << "not a vLLM shape";
    }
    ASSERT_TRUE(cbor_array_push(ex, cbor_move(item)));
  }
  ASSERT_TRUE(cbor_array_push(root, cbor_move(ex)));
  unsigned char* buffer = nullptr;
  size_t buffer_size = 0;
  size_t length = cbor_serialize_alloc(root, &buffer, &buffer_size);
  std::vector<std::uint8_t> theirs(buffer, buffer + length);
  free(buffer);
  cbor_decref(&root);
  EXPECT_EQ(ours, theirs);
}

TEST(VllmHashTest, LoraAndSaltChangeHashes) {
  auto tokens = Iota(32, 1);
  auto none = VllmNoneHash("0");
  auto plain = VllmBlockHashes(tokens, 16, none);
  auto lora = VllmBlockHashes(tokens, 16, none, {.lora_name = "adapter"});
  auto salt = VllmBlockHashes(tokens, 16, none, {.cache_salt = "s"});
  EXPECT_NE(plain[0], lora[0]);
  EXPECT_NE(plain[0], salt[0]);
  // The salt is an extra key of block 0 only, so block 1's own input differs only via parent.
  EXPECT_EQ(VllmBlockHash(salt[0], std::span<const TokenId>(tokens).subspan(16, 16)), salt[1]);
  // The adapter is an extra key of every block.
  EXPECT_EQ(VllmBlockHash(lora[0], std::span<const TokenId>(tokens).subspan(16, 16),
                          {ExtraKey::Text("adapter")}),
            lora[1]);
}

// vLLM's hashes of salted, adapter and image blocks (see kSaltedBlock0): a change to them is a
// change of the wire-visible hash and must be deliberate.
TEST(VllmHashTest, ExtraKeyHashesArePinned) {
  auto tokens = Iota(32, 1);
  auto none = VllmNoneHash("0");
  const std::vector<MmItem> image = {{.identifier = "img", .offset = 4, .length = 20}};
  auto salted = VllmBlockHashes(tokens, 16, none, {.cache_salt = "tenant-a"});
  auto adapter = VllmBlockHashes(tokens, 16, none, {.lora_name = "sql-lora"});
  auto with_image = VllmBlockHashes(tokens, 16, none, {.mm_items = image});
  EXPECT_EQ(salted[0].Low64(), kSaltedBlock0);
  EXPECT_EQ(adapter[1].Low64(), kAdapterBlock1);
  EXPECT_EQ(with_image[1].Low64(), kImageBlock1);
}

}  // namespace
}  // namespace kvroute::kv
