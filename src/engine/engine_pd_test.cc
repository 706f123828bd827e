// Prefill/decode disaggregation in the engine: the prefill leg's pin/free lifecycle, the
// decode leg's pull of only the blocks it lacks, and the interference P/D removes.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "engine/engine_test_util.h"
#include "engine/kv_transfer.h"

namespace kvroute::engine {
namespace {

using enginetest::BlocksConfig;
using enginetest::Drive;
using enginetest::EventsOf;
using enginetest::Req;
using enginetest::Seq;
using enginetest::StepOnce;
using enginetest::TestProfile;
using enginetest::Trace;

EngineConfig SmallConfig() {
  EngineConfig c = BlocksConfig(64);
  c.pinned_kv_timeout = std::chrono::seconds(2);
  return c;
}

RequestSpec PrefillLeg(std::string id, std::vector<TokenId> prompt) {
  RequestSpec s = Req(std::move(id), std::move(prompt), 1, /*ignore_eos=*/false);
  s.remote_decode = true;
  return s;
}

RequestSpec DecodeLeg(std::string id, std::vector<TokenId> prompt, std::uint32_t max_tokens,
                      std::uint32_t prefill_tp = 2) {
  RequestSpec s = Req(std::move(id), std::move(prompt), max_tokens);
  s.remote_prefill = RequestSpec::RemotePrefill{.prefill_tp = prefill_tp};
  return s;
}

TEST(EnginePrefillLegTest, FinishesCappedAndPinsItsBlocks) {
  auto engine = NewEngine(TestProfile(), SmallConfig());
  ASSERT_FALSE(engine->Add(PrefillLeg("p", Seq(40))));  // 2 full blocks + a partial one
  Trace run;
  Drive(*engine, &run);
  EXPECT_EQ(run.finish.at("p"), FinishReason::kLength);  // even without ignore_eos
  const TokenEvent& last = run.steps.back().tokens.back();
  ASSERT_TRUE(last.finished);
  EXPECT_EQ(last.pinned_block_ids.size(), 3u);
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.num_pinned_blocks, 3);
  EXPECT_EQ(s.num_pinned_requests, 1u);
  EXPECT_GT(s.kv_cache_usage, 0.0);  // pinned blocks are in use, not free
  auto pinned = engine->FindPinned("p");
  ASSERT_TRUE(pinned);
  EXPECT_EQ(pinned->block_ids, last.pinned_block_ids);
  EXPECT_EQ(pinned->num_prompt_tokens, 40u);
  // The full blocks were announced as usual: a pinned prefill is a prefix hit for others.
  EXPECT_EQ(EventsOf<kv::BlockStored>(run.events).size(), 1u);
}

TEST(EnginePrefillLegTest, ReleaseFreesThePinnedBlocksOnce) {
  auto engine = NewEngine(TestProfile(), SmallConfig());
  ASSERT_FALSE(engine->Add(PrefillLeg("p", Seq(40))));
  Trace run;
  Drive(*engine, &run);
  ASSERT_EQ(engine->Stats().num_pinned_blocks, 3);
  EXPECT_TRUE(engine->ReleasePinned("p"));
  EXPECT_FALSE(engine->ReleasePinned("p"));
  EXPECT_FALSE(engine->FindPinned("p"));
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.num_pinned_blocks, 0);
  EXPECT_EQ(s.pins_released, 1u);
  EXPECT_DOUBLE_EQ(s.kv_cache_usage, 0.0);
  EXPECT_TRUE(engine->ResetPrefixCache());  // nothing in use any more
}

TEST(EnginePrefillLegTest, UnreadPinsExpireAtTheTimeout) {
  auto engine = NewEngine(TestProfile(), SmallConfig());
  ASSERT_FALSE(engine->Add(PrefillLeg("p", Seq(40))));
  Trace run;
  Drive(*engine, &run);
  const auto deadline = engine->NextTimedEvent();
  ASSERT_TRUE(deadline);
  EXPECT_EQ(*deadline, run.now + std::chrono::seconds(2));
  EXPECT_TRUE(engine->Step(*deadline - Nanos(1)).pins_expired.empty());
  const StepResult r = engine->Step(*deadline);
  ASSERT_EQ(r.pins_expired.size(), 1u);
  EXPECT_EQ(r.pins_expired[0], "p");
  EXPECT_EQ(engine->Stats().num_pinned_blocks, 0);
  EXPECT_EQ(engine->Stats().pins_expired, 1u);
  EXPECT_FALSE(engine->NextTimedEvent());
  EXPECT_FALSE(engine->ReleasePinned("p"));  // a late decoder finds nothing
}

TEST(EngineDecodeLegTest, PullsOnlyTheBlocksItsPrefixCacheLacks) {
  const Profile profile = TestProfile();
  auto engine = NewEngine(profile, SmallConfig());
  // Cache 3 full blocks of the prompt locally first.
  ASSERT_FALSE(engine->Add(Req("warm", Seq(48), 1)));
  Trace run;
  Drive(*engine, &run);
  const std::size_t events_before = run.events.size();
  ASSERT_FALSE(engine->Add(DecodeLeg("d", Seq(80), 4)));  // 5 blocks: 3 hit, 2 pulled
  StepOnce(*engine, &run);  // schedules: starts the transfer, computes nothing
  EXPECT_EQ(engine->Stats().num_loading, 1u);
  EXPECT_FALSE(engine->HasWork());  // only a timed event is left
  const auto arrival = engine->NextTimedEvent();
  ASSERT_TRUE(arrival);
  run.now = *arrival;
  StepOnce(*engine, &run);  // the KV is here: the last prompt token is computed
  Drive(*engine, &run);

  std::vector<KvTransferDone> done;
  for (const StepResult& s : run.steps) {
    done.insert(done.end(), s.kv_transfers_done.begin(), s.kv_transfers_done.end());
  }
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].blocks, 2u);
  const double bytes = 2.0 * 16 * KvTransferBytesPerToken(profile.model, profile.hardware.num_gpus);
  EXPECT_DOUBLE_EQ(done[0].bytes, bytes);
  const Nanos alone = KvTransferTime(bytes, KvTransferLanes(2, profile.hardware.num_gpus),
                                     engine->config().kv_link);
  EXPECT_NEAR(ToSeconds(done[0].finished - done[0].started), ToSeconds(alone), 1e-6);
  EXPECT_EQ(run.tokens.at("d").size(), 4u);
  EXPECT_EQ(run.cached.at("d"), 79u);  // everything but the recomputed last prompt token
  // The pulled blocks (indexes 3 and 4) are announced like computed ones, nothing else.
  std::size_t stored_blocks = 0;
  std::vector<kv::KvEvent> after(run.events.begin() + events_before, run.events.end());
  std::set<TokenId> first_tokens;
  for (const kv::BlockStored& e : EventsOf<kv::BlockStored>(after)) {
    stored_blocks += e.block_hashes.size();
    for (std::size_t b = 0; b < e.block_hashes.size(); ++b) first_tokens.insert(e.token_ids[b * 16]);
  }
  EXPECT_EQ(first_tokens, (std::set<TokenId>{49, 65}));  // blocks 3 and 4 of Seq(80)
  EXPECT_EQ(stored_blocks, 2u);
  EXPECT_EQ(engine->Stats().kv_transfer_blocks, 2u);
}

TEST(EngineDecodeLegTest, AbortWhileKvIsInFlightFreesEverything) {
  auto engine = NewEngine(TestProfile(), SmallConfig());
  ASSERT_FALSE(engine->Add(DecodeLeg("d", Seq(200), 4)));
  Trace run;
  StepOnce(*engine, &run);
  ASSERT_EQ(engine->Stats().num_loading, 1u);
  EXPECT_GT(engine->Stats().kv_cache_usage, 0.0);
  engine->Abort("d");
  StepOnce(*engine, &run);
  EXPECT_EQ(run.steps.back().finished_without_token, std::vector<std::string>{"d"});
  EXPECT_EQ(engine->Stats().num_loading, 0u);
  EXPECT_DOUBLE_EQ(engine->Stats().kv_cache_usage, 0.0);
  EXPECT_FALSE(engine->NextTimedEvent());
}

TEST(EngineDecodeLegTest, ConcurrentPullsShareTheLink) {
  const Profile profile = TestProfile();
  auto engine = NewEngine(profile, SmallConfig());
  ASSERT_FALSE(engine->Add(DecodeLeg("a", Seq(160, 1), 2)));
  ASSERT_FALSE(engine->Add(DecodeLeg("b", Seq(160, 5000), 2)));
  Trace run;
  StepOnce(*engine, &run);
  ASSERT_EQ(engine->Stats().num_loading, 2u);
  const auto arrival = engine->NextTimedEvent();
  ASSERT_TRUE(arrival);
  // Two equal pulls over the same lanes take twice as long as one alone.
  const double bytes = 10.0 * 16 * KvTransferBytesPerToken(profile.model, profile.hardware.num_gpus);
  const LinkSpec& link = engine->config().kv_link;
  const double alone_s = ToSeconds(KvTransferTime(bytes, 2, link)) - link.latency_s;
  EXPECT_NEAR(ToSeconds(*arrival), 2 * alone_s + link.latency_s, 1e-6);
}

TEST(EngineDecodeLegTest, RefusedWithoutALink) {
  Profile p = TestProfile();
  p.links.clear();
  auto engine = NewEngine(p, SmallConfig());
  EXPECT_TRUE(engine->Add(DecodeLeg("d", Seq(40), 2)));
}

// Interference: the longest decode step seen by 8 running requests while a 12k-token
// prompt arrives. An aggregated engine prefills it in chunks inside their steps; a decode
// engine only pulls its KV and adds one token to one step.
Nanos WorstDecodeStepWhileALongPromptArrives(bool disaggregated, Nanos* baseline) {
  EngineConfig c;
  c.num_gpu_blocks_override = 4096;
  auto engine = NewEngine(TestProfile(), c);
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(engine->Add(Req("r" + std::to_string(i), Seq(1000, 1 + 2000 * i), 400)));
  }
  Trace run;
  for (int i = 0; i < 20; ++i) StepOnce(*engine, &run);  // prefill done, decoding
  *baseline = run.steps.back().duration;
  RequestSpec big = disaggregated ? DecodeLeg("big", Seq(12000, 50000), 8)
                                  : Req("big", Seq(12000, 50000), 8);
  EXPECT_FALSE(engine->Add(std::move(big)));
  Nanos worst{0};
  for (int i = 0; i < 200; ++i) {
    if (!engine->HasWork()) break;
    const StepResult& r = StepOnce(*engine, &run);
    worst = std::max(worst, r.duration);
  }
  return worst;
}

TEST(EngineInterferenceTest, PrefillChunksRaiseAggregatedItl) {
  Nanos baseline{0};
  const Nanos worst = WorstDecodeStepWhileALongPromptArrives(false, &baseline);
  EXPECT_GT(ToSeconds(worst), 3 * ToSeconds(baseline))
      << "baseline " << ToSeconds(baseline) << " s, worst " << ToSeconds(worst) << " s";
}

TEST(EngineInterferenceTest, DecodeOnlyEngineItlStaysFlat) {
  Nanos baseline{0};
  const Nanos worst = WorstDecodeStepWhileALongPromptArrives(true, &baseline);
  // The newcomer's context is read every step from then on, nothing more.
  EXPECT_LT(ToSeconds(worst), 1.2 * ToSeconds(baseline))
      << "baseline " << ToSeconds(baseline) << " s, worst " << ToSeconds(worst) << " s";
}

}  // namespace
}  // namespace kvroute::engine
