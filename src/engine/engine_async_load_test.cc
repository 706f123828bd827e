// Async lower-tier loads (EngineConfig::async_tier_loads): a request whose prefix is in host
// memory or on disk waits aside while it loads, so the running batch's steps do not pay for
// it; its first token comes after the load, with the same prefix hit and output as a
// synchronous load gives.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/step_time.h"

namespace kvroute::engine {
namespace {

using enginetest::BlocksConfig;
using enginetest::Drive;
using enginetest::DriveTimed;
using enginetest::Req;
using enginetest::Seq;
using enginetest::StepOnce;
using enginetest::TestProfile;
using enginetest::Trace;

// a's 3 full blocks go to the host tier when b needs the GPU (4 blocks in all); a2 repeats
// a. Host at 1 GB/s, so the load (16 tokens' KV per block) is far longer than a step.
EngineConfig SlowHostConfig(bool async) {
  EngineConfig c = BlocksConfig(4, 8);
  c.cpu_to_gpu_bandwidth_bytes_per_s = 1e9;
  c.async_tier_loads = async;
  return c;
}

void EvictAToTheHost(Engine& engine, Trace* run) {
  ASSERT_FALSE(engine.Add(Req("a", Seq(48), 1)));
  Drive(engine, run);
  ASSERT_FALSE(engine.Add(Req("b", Seq(48, 7000), 1)));
  Drive(engine, run);
}

TEST(EngineAsyncLoadTest, TheLoadingRequestWaitsAsideAndTheStepDoesNotPayForIt) {
  const Profile profile = TestProfile();
  auto engine = NewEngine(profile, SlowHostConfig(true));
  Trace run;
  EvictAToTheHost(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("a2", Seq(48), 1)));
  const StepTimeModel model(profile);
  const double load_s = 16 * model.KvBytesPerTokenTransfer() / 1e9;  // the sync test's hit
  // The first step starts the load and computes nothing: no work, a wake-up at the load's end.
  StepOnce(*engine, &run);
  EXPECT_FALSE(engine->HasWork());
  const auto ready = engine->NextTimedEvent();
  ASSERT_TRUE(ready.has_value());
  EXPECT_NEAR(ToSeconds(*ready - run.now), load_s, 1e-6);
  EXPECT_EQ(engine->Stats().num_waiting, 1u);  // vLLM counts a request awaiting KV as waiting
  // At the wake-up the prefix is a GPU hit: the step is the compute alone.
  run.now = *ready;
  const StepResult& r = StepOnce(*engine, &run);
  EXPECT_NEAR(ToSeconds(r.duration), ToSeconds(model.PrefillTime(16, 32)), 1e-6);
  ASSERT_EQ(r.tokens.size(), 1u);
  EXPECT_EQ(r.tokens[0].cached_tokens, 32u);
}

TEST(EngineAsyncLoadTest, SameHitOutputAndCountersAsASynchronousLoad) {
  Trace sync_run, async_run;
  auto sync = NewEngine(TestProfile(), SlowHostConfig(false));
  auto async = NewEngine(TestProfile(), SlowHostConfig(true));
  EvictAToTheHost(*sync, &sync_run);
  EvictAToTheHost(*async, &async_run);
  ASSERT_FALSE(sync->Add(Req("a2", Seq(48), 4)));
  ASSERT_FALSE(async->Add(Req("a2", Seq(48), 4)));
  Drive(*sync, &sync_run);
  DriveTimed(*async, &async_run);
  EXPECT_EQ(sync_run.tokens["a2"], async_run.tokens["a2"]);
  EXPECT_EQ(sync_run.cached["a2"], async_run.cached["a2"]);
  const EngineStats s = sync->Stats(), a = async->Stats();
  EXPECT_EQ(s.prefix_cache_queries, a.prefix_cache_queries);  // the reschedule is not a query
  EXPECT_EQ(s.prefix_cache_hits, a.prefix_cache_hits);
  EXPECT_EQ(s.tier_hit_tokens, a.tier_hit_tokens);
  EXPECT_EQ(s.tier_load_bytes, a.tier_load_bytes);
}

TEST(EngineAsyncLoadTest, ARunningDecodeKeepsItsStepTimeWhileAnotherRequestLoads) {
  // c decodes a long answer while a2 loads from the host over a link slow enough (100 MB/s)
  // that the load outlasts any step: with sync loads one of c's steps carries the whole
  // load, with async loads none does.
  const auto longest_step = [](bool async_loads) {
    EngineConfig cfg = SlowHostConfig(async_loads);
    cfg.num_gpu_blocks_override = 8;
    cfg.cpu_to_gpu_bandwidth_bytes_per_s = 1e8;
    auto engine = NewEngine(TestProfile(), cfg);
    Trace run;
    EXPECT_FALSE(engine->Add(Req("a", Seq(48), 1)));
    Drive(*engine, &run);
    EXPECT_FALSE(engine->Add(Req("b", Seq(96, 7000), 1)));  // 6 blocks: evicts a to the host
    Drive(*engine, &run);
    EXPECT_FALSE(engine->Add(Req("c", Seq(8, 9000), 40)));
    StepOnce(*engine, &run);  // c's prefill
    EXPECT_FALSE(engine->Add(Req("a2", Seq(48), 1)));
    Nanos longest{0};
    for (int i = 0; i < 200 && (engine->HasWork() || engine->NextTimedEvent()); ++i) {
      if (!engine->HasWork()) run.now = std::max(run.now, *engine->NextTimedEvent());
      longest = std::max(longest, StepOnce(*engine, &run).duration);
    }
    EXPECT_EQ(run.finish.count("a2"), 1u);
    EXPECT_EQ(run.finish.count("c"), 1u);
    return ToSeconds(longest);
  };
  const double load_s = 16 * StepTimeModel(TestProfile()).KvBytesPerTokenTransfer() / 1e8;
  EXPECT_GT(longest_step(false), load_s);
  EXPECT_LT(longest_step(true), load_s);
}

TEST(EngineAsyncLoadTest, TheFirstTokenSaysHowLongItsLoadQueuedAndMoved) {
  // a and d go to the host tier (b and c fill the GPU after them); a2 and d2 repeat them and
  // arrive together. One host path: d2's load starts when a2's ends, so its first token
  // reports a2's load time as its queue, and both report their own transfer time.
  EngineConfig cfg = SlowHostConfig(true);
  cfg.num_gpu_blocks_override = 8;
  cfg.num_cpu_blocks = 16;
  auto engine = NewEngine(TestProfile(), cfg);
  Trace run;
  struct Prompt {
    const char* id;
    TokenId start;
    std::size_t tokens;
  };
  for (const Prompt& p : {Prompt{"a", 1, 48}, Prompt{"d", 3000, 48}, Prompt{"b", 7000, 112},
                          Prompt{"c", 9000, 112}}) {
    ASSERT_FALSE(engine->Add(Req(p.id, Seq(p.tokens, p.start), 1)));
    Drive(*engine, &run);
  }
  ASSERT_FALSE(engine->Add(Req("a2", Seq(48), 1)));
  ASSERT_FALSE(engine->Add(Req("d2", Seq(48, 3000), 1)));
  const Nanos arrived = run.now;
  std::map<std::string, TtftParts> parts;
  for (int i = 0; i < 50 && (engine->HasWork() || engine->NextTimedEvent()); ++i) {
    if (!engine->HasWork()) run.now = std::max(run.now, *engine->NextTimedEvent());
    for (const TokenEvent& t : StepOnce(*engine, &run).tokens)
      if (t.is_first) parts[t.request_id] = t.ttft_parts;
  }
  ASSERT_EQ(parts.size(), 2u);
  const double load_s = parts["a2"].tier_transfer_s;
  EXPECT_GT(load_s, 0);
  EXPECT_EQ(parts["a2"].first_commit, arrived);  // both were given blocks in the first step
  EXPECT_EQ(parts["d2"].first_commit, arrived);
  EXPECT_NEAR(parts["d2"].tier_transfer_s, load_s, 1e-9);
  EXPECT_NEAR(parts["a2"].tier_path_queue_s, 0, 1e-9);
  EXPECT_NEAR(parts["d2"].tier_path_queue_s, load_s, 1e-9);
}

TEST(EngineAsyncLoadTest, AbortWhileLoadingFreesItsBlocks) {
  auto engine = NewEngine(TestProfile(), SlowHostConfig(true));
  Trace run;
  EvictAToTheHost(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("a2", Seq(48), 1)));
  StepOnce(*engine, &run);
  ASSERT_TRUE(engine->NextTimedEvent().has_value());
  engine->Abort("a2");
  StepOnce(*engine, &run);
  EXPECT_FALSE(engine->NextTimedEvent().has_value());
  EXPECT_EQ(engine->Stats().num_waiting, 0u);
  EXPECT_EQ(engine->Stats().kv_cache_usage, 0.0);
}

}  // namespace
}  // namespace kvroute::engine
