#include "kv/keys/block_key.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kvroute::kv {
namespace {

// Computed by the keyer before extra keys entered blocks (see PlainKeysArePinned).
constexpr BlockKey kPinnedRoot = 5773295469401973285ULL;
constexpr BlockKey kPinnedBlock0 = 11128812915101222514ULL;

std::vector<TokenId> Iota(std::size_t n, TokenId start = 1) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockKeyerTest, OnlyFullBlocksAreKeyed) {
  BlockKeyer keyer(16);
  EXPECT_EQ(keyer.Keys(Iota(15)).size(), 0u);
  EXPECT_EQ(keyer.Keys(Iota(16)).size(), 1u);
  EXPECT_EQ(keyer.Keys(Iota(47)).size(), 2u);
}

TEST(BlockKeyerTest, EqualPrefixesGiveEqualKeysAndDivergenceChangesTheRest) {
  BlockKeyer keyer(4);
  auto a = Iota(16);
  auto b = a;
  b[5] = 999;  // second block differs
  auto ka = keyer.Keys(a);
  auto kb = keyer.Keys(b);
  ASSERT_EQ(ka.size(), 4u);
  EXPECT_EQ(ka[0], kb[0]);
  for (int i = 1; i < 4; ++i) EXPECT_NE(ka[i], kb[i]) << i;
}

TEST(BlockKeyerTest, ChainDependsOnParentNotOnlyOnContent) {
  BlockKeyer keyer(4);
  std::vector<TokenId> same = {7, 7, 7, 7, 7, 7, 7, 7};
  auto keys = keyer.Keys(same);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_NE(keys[0], keys[1]);  // identical content, different position
}

TEST(BlockKeyerTest, StreamingNextMatchesBatchKeys) {
  BlockKeyer keyer(16);
  auto tokens = Iota(64);
  const ExtraKeyInputs in{.lora_name = "adapter", .cache_salt = "salt"};
  auto keys = keyer.Keys(tokens, in);
  BlockKey parent = keyer.Root();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    parent = keyer.Next(parent, std::span<const TokenId>(tokens).subspan(i * 16, 16),
                        BlockExtraKeysFor(in, i * 16, (i + 1) * 16));
    EXPECT_EQ(parent, keys[i]);
  }
}

TEST(BlockKeyerTest, LoraAndSaltSeparateNamespaces) {
  BlockKeyer keyer(16);
  auto t = Iota(16);
  EXPECT_NE(keyer.Keys(t)[0], keyer.Keys(t, {.lora_name = "lora-a"})[0]);
  EXPECT_NE(keyer.Keys(t, {.lora_name = "lora-a"})[0], keyer.Keys(t, {.lora_name = "lora-b"})[0]);
  EXPECT_NE(keyer.Keys(t)[0], keyer.Keys(t, {.cache_salt = "salt"})[0]);
  // Each extra key is its own CBOR item: ("ab", "") and ("a", "b") stay apart.
  EXPECT_NE(keyer.Keys(t, {.lora_name = "ab"})[0],
            keyer.Keys(t, {.lora_name = "a", .cache_salt = "b"})[0]);
}

TEST(BlockKeyerTest, PlainKeysArePinned) {
  // Keys of prompts without extra keys are what they were before extra keys were folded into
  // blocks (snapshots and recorded traces keep their meaning).
  BlockKeyer keyer(16);
  EXPECT_EQ(keyer.Root(), kPinnedRoot);
  EXPECT_EQ(keyer.Keys(Iota(16))[0], kPinnedBlock0);
}

TEST(BlockKeyerTest, SeedChangesKeys) {
  auto t = Iota(16);
  EXPECT_NE(BlockKeyer(16, 1).Keys(t)[0], BlockKeyer(16, 2).Keys(t)[0]);
}

}  // namespace
}  // namespace kvroute::kv
