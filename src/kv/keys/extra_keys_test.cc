// The extra-keys rule (kv/keys/extra_keys.h), the keyer that folds it in, and the index's event
// path against the request path: for salted, adapter and image requests, the keys the index
// derives from vLLM-shaped events (extra_keys as vLLM sends them, sha256_cbor hashes) equal
// the keys a request computes, and a request with other extra keys matches nothing.
#include "kv/keys/extra_keys.h"

#include <gtest/gtest.h>

#include <numeric>

#include "kv/keys/block_key.h"
#include "kv/index/index.h"
#include "kv/keys/vllm_hash.h"

namespace kvroute::kv {
namespace {

constexpr std::uint32_t kBlock = 16;

std::vector<TokenId> Iota(std::size_t n, TokenId start = 1) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(ExtraKeysTest, NoInputsMeanNoExtraKeysOnAnyBlock) {
  EXPECT_TRUE(BlockExtraKeysFor({}, 0, 16).empty());
  EXPECT_TRUE(PromptExtraKeys({}, 64, 16).empty());
}

TEST(ExtraKeysTest, AdapterOnEveryBlockAndSaltOnTheFirstOnly) {
  const ExtraKeyInputs in{.lora_name = "sql-lora", .cache_salt = "tenant-a"};
  auto keys = PromptExtraKeys(in, 48, 16);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0], (BlockExtraKeys{ExtraKey::Text("sql-lora"), ExtraKey::Text("tenant-a")}));
  EXPECT_EQ(keys[1], BlockExtraKeys{ExtraKey::Text("sql-lora")});
  EXPECT_EQ(keys[2], BlockExtraKeys{ExtraKey::Text("sql-lora")});
}

TEST(ExtraKeysTest, AnImageNamesEveryBlockItOverlapsWithItsOffsetFromTheBlockStart) {
  // Placeholders at [20, 60): blocks 1, 2 and 3 overlap it; block 0 and 4 do not.
  const std::vector<MmItem> images = {{.identifier = "img", .offset = 20, .length = 40}};
  auto keys = PromptExtraKeys({.mm_items = images}, 80, 16);
  ASSERT_EQ(keys.size(), 5u);
  EXPECT_TRUE(keys[0].empty());
  EXPECT_EQ(keys[1], BlockExtraKeys{ExtraKey::Mm("img", 4)});
  EXPECT_EQ(keys[2], BlockExtraKeys{ExtraKey::Mm("img", -12)});
  EXPECT_EQ(keys[3], BlockExtraKeys{ExtraKey::Mm("img", -28)});
  EXPECT_TRUE(keys[4].empty());
}

TEST(ExtraKeysTest, OrderIsAdapterThenImagesThenSalt) {
  const std::vector<MmItem> images = {{.identifier = "a", .offset = 2, .length = 3},
                                      {.identifier = "b", .offset = 8, .length = 30}};
  auto keys = BlockExtraKeysFor({.lora_name = "l", .cache_salt = "s", .mm_items = images}, 0, 16);
  EXPECT_EQ(keys, (BlockExtraKeys{ExtraKey::Text("l"), ExtraKey::Mm("a", 2), ExtraKey::Mm("b", 8),
                                  ExtraKey::Text("s")}));
}

TEST(ExtraKeysTest, KeysOfPlainPromptsDoNotChangeAndExtraKeysSeparateThem) {
  BlockKeyer keyer(kBlock);
  auto t = Iota(32);
  // No extra keys: the bytes hashed are parent ‖ tokens, as before extra keys existed.
  EXPECT_EQ(keyer.Keys(t), keyer.Keys(t, {}));
  EXPECT_EQ(keyer.Keys(t)[0], keyer.Next(keyer.Root(), std::span<const TokenId>(t).subspan(0, 16)));
  auto salted = keyer.Keys(t, {.cache_salt = "a"});
  auto other = keyer.Keys(t, {.cache_salt = "b"});
  auto adapter = keyer.Keys(t, {.lora_name = "a"});
  EXPECT_NE(salted[0], keyer.Keys(t)[0]);
  EXPECT_NE(salted[0], other[0]);
  // vLLM's tuples carry no kind: block 0 of salt "a" and of adapter "a" are both ("a",), and
  // their hashes too; the adapter is on every block, so block 1 tells them apart.
  EXPECT_EQ(salted[0], adapter[0]);
  EXPECT_NE(salted[1], adapter[1]);
  const std::vector<MmItem> img_a = {{.identifier = "A", .offset = 20, .length = 8}};
  const std::vector<MmItem> img_b = {{.identifier = "B", .offset = 20, .length = 8}};
  auto with_a = keyer.Keys(t, {.mm_items = img_a});
  auto with_b = keyer.Keys(t, {.mm_items = img_b});
  EXPECT_EQ(with_a[0], keyer.Keys(t)[0]);  // block 0 does not overlap the image
  EXPECT_NE(with_a[1], with_b[1]);
}

// vLLM's BlockStored for a whole prompt (one run from block 0), with the extra_keys vLLM sends
// (or none, as before PR #33304) and its sha256_cbor hashes under PYTHONHASHSEED=0.
BlockStored VllmStored(const std::vector<TokenId>& tokens, const ExtraKeyInputs& in,
                       bool carry_extra_keys) {
  BlockStored e;
  e.block_size = kBlock;
  e.token_ids = tokens;
  for (const auto& d : VllmBlockHashes(tokens, kBlock, VllmNoneHash("0"), in)) {
    e.block_hashes.push_back(d.Low64());
  }
  if (!in.lora_name.empty()) e.lora_name = std::string(in.lora_name);
  if (carry_extra_keys) {
    e.extra_keys.emplace();
    for (std::size_t b = 0; b < tokens.size() / kBlock; ++b) {
      e.extra_keys->push_back(BlockExtraKeysFor(in, b * kBlock, (b + 1) * kBlock));
    }
  }
  return e;
}

std::uint32_t DepthOn(const KvIndex& index, WorkerId worker, std::span<const BlockKey> keys) {
  for (const auto& m : index.Lookup(keys)) {
    if (m.worker == worker) return m.any_depth;
  }
  return 0;
}

class EventAndRequestKeysTest : public ::testing::Test {
 protected:
  KvIndex index_{BlockKeyer(kBlock)};
  std::vector<TokenId> tokens_ = Iota(64);
};

TEST_F(EventAndRequestKeysTest, ASaltedRequestMatchesItsOwnBlocksAndNoOtherTenantDoes) {
  index_.ApplyEvent(1, VllmStored(tokens_, {.cache_salt = "tenant-a"}, true));
  const auto& k = index_.keyer();
  EXPECT_EQ(DepthOn(index_, 1, k.Keys(tokens_, {.cache_salt = "tenant-a"})), 4u);
  EXPECT_EQ(DepthOn(index_, 1, k.Keys(tokens_, {.cache_salt = "tenant-b"})), 0u);
  EXPECT_EQ(DepthOn(index_, 1, k.Keys(tokens_)), 0u);
}

TEST_F(EventAndRequestKeysTest, AnAdapterRequestMatchesItsAdapterBlocksOnly) {
  index_.ApplyEvent(1, VllmStored(tokens_, {.lora_name = "sql-lora"}, true));
  // The same from an engine without extra_keys: its lora_name field says as much.
  index_.ApplyEvent(2, VllmStored(tokens_, {.lora_name = "sql-lora"}, false));
  const auto& k = index_.keyer();
  EXPECT_EQ(DepthOn(index_, 1, k.Keys(tokens_, {.lora_name = "sql-lora"})), 4u);
  EXPECT_EQ(DepthOn(index_, 2, k.Keys(tokens_, {.lora_name = "sql-lora"})), 4u);
  EXPECT_EQ(DepthOn(index_, 1, k.Keys(tokens_)), 0u);
  EXPECT_EQ(DepthOn(index_, 1, k.Keys(tokens_, {.lora_name = "other"})), 0u);
}

TEST_F(EventAndRequestKeysTest, AnImageRequestMatchesUpToTheImageOfAnotherOne) {
  const std::vector<MmItem> a = {{.identifier = "img-a", .offset = 20, .length = 24}};
  const std::vector<MmItem> b = {{.identifier = "img-b", .offset = 20, .length = 24}};
  index_.ApplyEvent(1, VllmStored(tokens_, {.mm_items = a}, true));
  const auto& k = index_.keyer();
  EXPECT_EQ(DepthOn(index_, 1, k.Keys(tokens_, {.mm_items = a})), 4u);
  // Another image in the same place: only block 0 (before it) is shared.
  EXPECT_EQ(DepthOn(index_, 1, k.Keys(tokens_, {.mm_items = b})), 1u);
}

TEST_F(EventAndRequestKeysTest, AllInputsTogetherGiveEqualKeysOnBothPaths) {
  const std::vector<MmItem> img = {{.identifier = "img", .offset = 5, .length = 40}};
  const ExtraKeyInputs in{.lora_name = "l", .cache_salt = "s", .mm_items = img};
  index_.ApplyEvent(1, VllmStored(tokens_, in, true));
  EXPECT_EQ(DepthOn(index_, 1, index_.keyer().Keys(tokens_, in)), 4u);
}

TEST_F(EventAndRequestKeysTest, WithoutExtraKeysASaltedWorkersBlockZeroIsCreditedToNobody) {
  // An engine that cannot say which blocks are salted (no extra_keys): before kvroute sent the
  // worker a salted request its blocks are plain; afterwards runs from block 0 stay out.
  index_.ApplyEvent(1, VllmStored(tokens_, {}, false));
  EXPECT_EQ(DepthOn(index_, 1, index_.keyer().Keys(tokens_)), 4u);
  index_.MarkSaltedTraffic(1);
  auto other = Iota(64, 500);
  index_.ApplyEvent(1, VllmStored(other, {.cache_salt = "tenant-a"}, false));
  EXPECT_EQ(DepthOn(index_, 1, index_.keyer().Keys(other)), 0u);
  EXPECT_EQ(DepthOn(index_, 1, index_.keyer().Keys(other, {.cache_salt = "tenant-a"})), 0u);
  EXPECT_EQ(index_.counters().unattributed_runs, 1u);
  EXPECT_EQ(index_.counters().unattributed_blocks, 4u);
  // Events that carry extra_keys stay exact on that worker.
  auto third = Iota(64, 900);
  index_.ApplyEvent(1, VllmStored(third, {.cache_salt = "tenant-a"}, true));
  EXPECT_EQ(DepthOn(index_, 1, index_.keyer().Keys(third, {.cache_salt = "tenant-a"})), 4u);
}

TEST_F(EventAndRequestKeysTest, ExtraKeysOfTheWrongCountAreSkipped) {
  BlockStored e = VllmStored(tokens_, {.cache_salt = "s"}, true);
  e.extra_keys->pop_back();
  index_.ApplyEvent(1, e);
  EXPECT_EQ(index_.counters().extra_keys_mismatch, 1u);
  EXPECT_EQ(index_.stats().entries, 0u);
}

TEST_F(EventAndRequestKeysTest, AnOldEngineLoraIdKeepsItsBlocksApartFromTheBaseModel) {
  BlockStored e = VllmStored(tokens_, {}, false);
  e.lora_id = 3;  // vLLM before lora_name: kvroute cannot name this adapter
  index_.ApplyEvent(1, e);
  EXPECT_EQ(DepthOn(index_, 1, index_.keyer().Keys(tokens_)), 0u);
}

}  // namespace
}  // namespace kvroute::kv
