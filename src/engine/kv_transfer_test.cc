#include "engine/kv_transfer.h"

#include <gtest/gtest.h>

#include "engine/step_time.h"

namespace kvroute::engine {
namespace {

ModelSpec Gqa(std::uint32_t kv_heads) {
  ModelSpec m;
  m.num_layers = 64;
  m.num_kv_heads = kv_heads;
  m.head_dim = 128;
  m.kv_bytes_per_element = 2;
  return m;
}

ModelSpec Mla() {
  ModelSpec m;
  m.mla = true;
  m.num_layers = 61;
  m.kv_lora_rank = 512;
  m.qk_rope_head_dim = 64;
  m.kv_bytes_per_element = 1;  // fp8 KV cache
  return m;
}

LinkSpec Link(double gb_per_s, double latency_s = 0) {
  return LinkSpec{.name = "test", .bandwidth_bytes_per_s = gb_per_s * 1e9, .latency_s = latency_s};
}

TEST(KvTransferBytesTest, GqaMovesEveryKvHeadOnceWhateverTheDecodeTp) {
  // 2 (K, V) x 64 layers x 8 heads x 128 x 2 bytes: each decode rank pulls its own heads.
  const double full = 2.0 * 64 * 8 * 128 * 2;
  for (std::uint32_t tp : {1u, 2u, 4u, 8u}) EXPECT_DOUBLE_EQ(KvTransferBytesPerToken(Gqa(8), tp), full);
}

TEST(KvTransferBytesTest, GqaHeadsReplicatedWhenDecodeTpExceedsKvHeads) {
  // 16 ranks, 8 heads: every head lives on two ranks, so both pull it.
  EXPECT_DOUBLE_EQ(KvTransferBytesPerToken(Gqa(8), 16), 2 * KvTransferBytesPerToken(Gqa(8), 8));
}

TEST(KvTransferBytesTest, MlaLatentIsPulledByEveryDecodeRank) {
  const double latent = 61.0 * (512 + 64) * 1;
  EXPECT_DOUBLE_EQ(KvTransferBytesPerToken(Mla(), 1), latent);
  EXPECT_DOUBLE_EQ(KvTransferBytesPerToken(Mla(), 2), 2 * latent);
  EXPECT_DOUBLE_EQ(KvTransferBytesPerToken(Mla(), 8), 8 * latent);
}

TEST(KvTransferBytesTest, MatchesTheStepModelsPerTokenBytesForGqa) {
  // The CPU tier's per-token bytes and a P/D pull of a GQA model are the same quantity.
  auto p = LoadProfile("qwen3-32b-tp2-h100");
  ASSERT_TRUE(p.has_value());
  EXPECT_DOUBLE_EQ(KvTransferBytesPerToken(p->model, p->hardware.num_gpus),
                   StepTimeModel(*p).KvBytesPerTokenTransfer());
}

TEST(KvTransferLanesTest, HeterogeneousTpUsesTheNarrowerSide) {
  EXPECT_EQ(KvTransferLanes(4, 2), 2u);  // Infera's TP4 prefill -> TP2 decode
  EXPECT_EQ(KvTransferLanes(2, 4), 2u);
  EXPECT_EQ(KvTransferLanes(8, 8), 8u);
  EXPECT_EQ(KvTransferLanes(0, 4), 1u);
}

TEST(KvTransferTimeTest, IsLatencyPlusBytesOverLanesTimesBandwidth) {
  const LinkSpec link = Link(12.0, 0.002);
  const double bytes = 3e9;
  EXPECT_NEAR(ToSeconds(KvTransferTime(bytes, 2, link)), 0.002 + 3e9 / (2 * 12e9), 1e-9);
  // Heterogeneous TP: a TP4 -> TP2 pull is as fast as TP2 -> TP2, slower than TP4 -> TP4.
  EXPECT_EQ(KvTransferTime(bytes, KvTransferLanes(4, 2), link),
            KvTransferTime(bytes, KvTransferLanes(2, 2), link));
  EXPECT_GT(KvTransferTime(bytes, KvTransferLanes(4, 2), link),
            KvTransferTime(bytes, KvTransferLanes(4, 4), link));
}

TEST(SharedLinkTest, OneTransferAloneTakesItsIdleTime) {
  const LinkSpec link = Link(10.0, 0.001);
  SharedLink l(link, 2);
  l.Start(7, 4e9, 2, Nanos(0));
  const auto next = l.NextCompletion();
  ASSERT_TRUE(next);
  EXPECT_NEAR(ToSeconds(*next), ToSeconds(KvTransferTime(4e9, 2, link)), 1e-6);
  EXPECT_TRUE(l.AdvanceTo(*next - Nanos(1000)).empty());
  auto done = l.AdvanceTo(*next);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, 7u);
  EXPECT_DOUBLE_EQ(done[0].bytes, 4e9);
  EXPECT_EQ(l.active(), 0u);
  EXPECT_FALSE(l.NextCompletion());
}

TEST(SharedLinkTest, ConcurrentTransfersShareTheBandwidth) {
  const LinkSpec link = Link(10.0);
  SharedLink l(link, 1);
  l.Start(1, 1e9, 1, Nanos(0));
  l.Start(2, 1e9, 1, Nanos(0));
  // Two equal transfers at half rate each both end at twice the time of one alone.
  auto done = l.AdvanceTo(FromSeconds(1.0));
  ASSERT_EQ(done.size(), 2u);
  const double alone = ToSeconds(KvTransferTime(1e9, 1, link));
  EXPECT_NEAR(ToSeconds(done[0].finished), 2 * alone, 1e-6);
  EXPECT_NEAR(ToSeconds(done[1].finished), 2 * alone, 1e-6);
}

TEST(SharedLinkTest, ALaterTransferSlowsTheFirstOnlyWhileBothRun) {
  SharedLink l(Link(10.0), 1);
  l.Start(1, 1e9, 1, Nanos(0));             // alone: 0.1 s
  l.Start(2, 0.25e9, 1, FromSeconds(0.05));  // joins at half-way
  // 0.05 s alone (0.5 GB), then both at 5 GB/s: #2 drains its 0.25 GB by 0.1 s, #1 has
  // 0.25 GB left and drains it alone at 10 GB/s by 0.125 s.
  auto done = l.AdvanceTo(FromSeconds(1));
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].id, 2u);
  EXPECT_NEAR(ToSeconds(done[0].finished), 0.1, 1e-6);
  EXPECT_NEAR(ToSeconds(done[1].finished), 0.125, 1e-6);
}

TEST(SharedLinkTest, AFlowCappedByItsLanesLeavesTheRestToOthers) {
  // An 8-lane engine link; a 2-lane transfer (TP2 prefill) can use 2 lanes only, a 6-lane
  // one gets the other 6 even though a fair split would give each 4.
  SharedLink l(Link(1.0), 8);
  l.Start(1, 2e9, 2, Nanos(0));
  l.Start(2, 6e9, 8, Nanos(0));
  auto done = l.AdvanceTo(FromSeconds(10));
  ASSERT_EQ(done.size(), 2u);
  EXPECT_NEAR(ToSeconds(done[0].finished), 1.0, 1e-6);
  EXPECT_NEAR(ToSeconds(done[1].finished), 1.0, 1e-6);
}

TEST(SharedLinkTest, CancelledTransferFreesItsShare) {
  SharedLink l(Link(10.0), 1);
  l.Start(1, 1e9, 1, Nanos(0));
  l.Start(2, 1e9, 1, Nanos(0));
  l.Cancel(2);
  auto done = l.AdvanceTo(FromSeconds(1));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, 1u);
  EXPECT_NEAR(ToSeconds(done[0].finished), 0.1, 1e-6);
}

TEST(SharedLinkTest, NextCompletionIsWhenAdvanceToReturnsIt) {
  SharedLink l(Link(3.0, 0.0005), 2);
  l.Start(1, 7e8, 2, Nanos(0));
  l.Start(2, 2e8, 1, FromSeconds(0.01));
  int finished = 0;
  for (int guard = 0; guard < 10 && l.active() > 0; ++guard) {
    const auto next = l.NextCompletion();
    ASSERT_TRUE(next);
    const auto done = l.AdvanceTo(*next);
    ASSERT_FALSE(done.empty()) << "nothing finished at the predicted time";
    for (const auto& d : done) EXPECT_LE(d.finished, *next);
    finished += static_cast<int>(done.size());
  }
  EXPECT_EQ(finished, 2);
}

}  // namespace
}  // namespace kvroute::engine
