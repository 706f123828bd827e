#include "kv/vllm_hash.h"

#include <cbor.h>
#include <gtest/gtest.h>

#include <numeric>

namespace kvroute::kv {
namespace {

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
  std::vector<VllmExtraKey> extras = {"my-lora", std::string(30, 's')};
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
  cbor_item_t* ex = cbor_new_definite_array(extras.size());
  for (auto& e : extras) ASSERT_TRUE(cbor_array_push(ex, cbor_move(cbor_build_string(e.c_str()))));
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
  auto lora = VllmBlockHashes(tokens, 16, none, "adapter");
  auto salt = VllmBlockHashes(tokens, 16, none, "", "s");
  EXPECT_NE(plain[0], lora[0]);
  EXPECT_NE(plain[0], salt[0]);
  // The salt is an extra key of block 0 only, so block 1's own input differs only via parent.
  EXPECT_EQ(VllmBlockHash(salt[0], std::span<const TokenId>(tokens).subspan(16, 16)), salt[1]);
}

}  // namespace
}  // namespace kvroute::kv
