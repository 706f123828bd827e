// The engine's scheduling as seen from outside: token budget, max_num_seqs, chunked prefill,
// preemption, abort, admission checks, determinism, step timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/step_time.h"

namespace kvroute::engine {
namespace {

using enginetest::BlocksConfig;
using enginetest::Drive;
using enginetest::Req;
using enginetest::Seq;
using enginetest::StepOnce;
using enginetest::TestProfile;
using enginetest::Trace;

EngineConfig Config(std::int64_t gpu_blocks, std::uint32_t budget = 8192,
                    std::uint32_t max_seqs = 256) {
  EngineConfig c = BlocksConfig(gpu_blocks);
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  return c;
}

TEST(EngineSchedTest, StepsNeverExceedTheTokenBudget) {
  auto engine = NewEngine(TestProfile(), Config(256, 64));
  for (int i = 0; i < 3; ++i) {
    ASSERT_FALSE(engine->Add(Req("r" + std::to_string(i), Seq(100, 1000 * (i + 1)), 5)));
  }
  Trace run;
  Drive(*engine, &run);
  ASSERT_FALSE(run.steps.empty());
  EXPECT_EQ(run.steps[0].num_prefill_tokens, 64u);
  for (const StepResult& s : run.steps) {
    EXPECT_LE(s.num_prefill_tokens + s.num_decode_tokens, 64u);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(run.tokens["r" + std::to_string(i)].size(), 5u);
}

TEST(EngineSchedTest, RunningRequestsNeverExceedMaxNumSeqs) {
  auto engine = NewEngine(TestProfile(), Config(256, 8192, 2));
  for (int i = 0; i < 5; ++i) {
    ASSERT_FALSE(engine->Add(Req("r" + std::to_string(i), Seq(20, 100 * (i + 1)), 3)));
  }
  Trace run;
  std::uint32_t max_running = 0;
  for (int i = 0; i < 1000 && engine->HasWork(); ++i) {
    StepOnce(*engine, &run);
    max_running = std::max(max_running, engine->Stats().num_running);
    EXPECT_LE(run.steps.back().tokens.size(), 2u);
  }
  EXPECT_EQ(max_running, 2u);
  EXPECT_EQ(run.tokens.size(), 5u);
}

TEST(EngineSchedTest, LongPromptIsChunkedOverSteps) {
  auto engine = NewEngine(TestProfile(), Config(256, 32));
  ASSERT_FALSE(engine->Add(Req("a", Seq(100), 2)));
  Trace run;
  Drive(*engine, &run);
  // 32 + 32 + 32 + 4 prompt tokens, the first token at the end of the 4th step, then 1 decode.
  ASSERT_EQ(run.steps.size(), 5u);
  EXPECT_EQ(run.steps[0].num_prefill_tokens, 32u);
  EXPECT_TRUE(run.steps[0].tokens.empty());
  EXPECT_TRUE(run.steps[2].tokens.empty());
  EXPECT_EQ(run.steps[3].num_prefill_tokens, 4u);
  ASSERT_EQ(run.steps[3].tokens.size(), 1u);
  EXPECT_TRUE(run.steps[3].tokens[0].is_first);
  EXPECT_EQ(run.steps[4].num_decode_tokens, 1u);
  for (const StepResult& s : run.steps) EXPECT_GT(s.duration.count(), 0);
}

TEST(EngineSchedTest, WithoutChunkingPromptsRunWholeAndOversizedOnesAreRefused) {
  EngineConfig c = Config(256, 32);
  c.enable_chunked_prefill = false;
  auto engine = NewEngine(TestProfile(), c);
  EXPECT_TRUE(engine->Add(Req("big", Seq(100), 2)).has_value());  // would never fit a step
  ASSERT_FALSE(engine->Add(Req("a", Seq(20), 4)));
  ASSERT_FALSE(engine->Add(Req("b", Seq(20, 500), 4)));
  const StepResult r = engine->Step(Nanos(0));
  // "b" does not fit the 12 tokens left and is not split: it waits for the next step.
  EXPECT_EQ(r.num_prefill_tokens, 20u);
  EXPECT_EQ(engine->Stats().num_waiting, 1u);
  Trace run;
  Drive(*engine, &run);
  EXPECT_EQ(run.tokens["b"].size(), 4u);
}

TEST(EngineSchedTest, DecodesOfRunningRequestsGoBeforeNewPrefills) {
  auto engine = NewEngine(TestProfile(), Config(256, 40));
  ASSERT_FALSE(engine->Add(Req("a", Seq(20), 10)));
  Trace run;
  StepOnce(*engine, &run);  // a prefilled, first token out
  ASSERT_FALSE(engine->Add(Req("b", Seq(100, 500), 2)));
  const StepResult& r = StepOnce(*engine, &run);
  EXPECT_EQ(r.num_decode_tokens, 1u);
  EXPECT_EQ(r.num_prefill_tokens, 39u);  // the rest of the budget
}

TEST(EngineSchedTest, PreemptsTheNewestWhenMemoryRunsOutAndStillCompletesAll) {
  // 6 blocks; two requests of 32 prompt + 40 output tokens need 5 blocks each at the end.
  auto engine = NewEngine(TestProfile(), Config(6));
  ASSERT_FALSE(engine->Add(Req("old", Seq(32, 1), 40)));
  ASSERT_FALSE(engine->Add(Req("new", Seq(32, 5000), 40)));
  Trace run;
  Drive(*engine, &run);
  EXPECT_GT(engine->Stats().num_preemptions, 0u);
  EXPECT_EQ(run.tokens["old"].size(), 40u);
  EXPECT_EQ(run.tokens["new"].size(), 40u);
  // The older request was never preempted, so it finished first.
  std::size_t old_done = 0, new_done = 0;
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    for (const TokenEvent& t : run.steps[i].tokens) {
      if (t.finished && t.request_id == "old") old_done = i;
      if (t.finished && t.request_id == "new") new_done = i;
    }
  }
  EXPECT_LT(old_done, new_done);
  EXPECT_DOUBLE_EQ(engine->Stats().kv_cache_usage, 0.0);
}

TEST(EngineSchedTest, PreemptionDoesNotChangeTheOutput) {
  auto alone = NewEngine(TestProfile(), Config(64));
  ASSERT_FALSE(alone->Add(Req("new", Seq(32, 5000), 40)));
  Trace solo;
  Drive(*alone, &solo);
  auto tight = NewEngine(TestProfile(), Config(6));
  ASSERT_FALSE(tight->Add(Req("old", Seq(32, 1), 40)));
  ASSERT_FALSE(tight->Add(Req("new", Seq(32, 5000), 40)));
  Trace run;
  Drive(*tight, &run);
  ASSERT_GT(tight->Stats().num_preemptions, 0u);
  EXPECT_EQ(run.tokens["new"], solo.tokens["new"]);
}

TEST(EngineSchedTest, AbortReleasesBlocksAndIsReported) {
  auto engine = NewEngine(TestProfile(), Config(64, 8192, 1));
  ASSERT_FALSE(engine->Add(Req("run", Seq(40), 50)));
  ASSERT_FALSE(engine->Add(Req("wait", Seq(40, 900), 50)));
  Trace run;
  StepOnce(*engine, &run);
  EXPECT_GT(engine->Stats().kv_cache_usage, 0.0);
  engine->Abort("run");
  engine->Abort("wait");
  engine->Abort("unknown");  // ignored
  EXPECT_DOUBLE_EQ(engine->Stats().kv_cache_usage, 0.0);
  EXPECT_EQ(engine->Stats().num_running + engine->Stats().num_waiting, 0u);
  ASSERT_TRUE(engine->HasWork());
  const StepResult& r = StepOnce(*engine, &run);
  EXPECT_EQ(r.finished_without_token, (std::vector<std::string>{"run", "wait"}));
  EXPECT_FALSE(engine->HasWork());
  // The id is free again.
  EXPECT_FALSE(engine->Add(Req("run", Seq(8), 1)));
}

TEST(EngineSchedTest, RefusesRequestsThatCannotFit) {
  EngineConfig c = Config(64);
  c.max_model_len = 100;
  auto engine = NewEngine(TestProfile(), c);
  EXPECT_TRUE(engine->Add(Req("a", Seq(90), 11)).has_value());
  EXPECT_FALSE(engine->Add(Req("b", Seq(90), 10)).has_value());
  EXPECT_TRUE(engine->Add(Req("b", Seq(10), 1)).has_value());  // id in use
  EXPECT_TRUE(engine->Add(Req("c", {}, 1)).has_value());       // empty prompt
  auto tiny = NewEngine(TestProfile(), Config(2));
  EXPECT_TRUE(tiny->Add(Req("d", Seq(40), 1)).has_value());  // 3 blocks > capacity 2
}

TEST(EngineSchedTest, MaxModelLenDefaultsToTheProfile) {
  const Profile p = TestProfile();
  auto engine = NewEngine(p, Config(100000));
  EXPECT_EQ(engine->config().max_model_len, p.max_model_len);
  EXPECT_FALSE(engine->Add(Req("ok", Seq(p.max_model_len - 16), 16)).has_value());
  EXPECT_TRUE(engine->Add(Req("no", Seq(p.max_model_len - 16), 17)).has_value());
}

TEST(EngineSchedTest, SameSeedAndPromptGiveTheSameTokens) {
  auto run_once = [](std::uint64_t engine_seed, std::uint64_t req_seed) {
    EngineConfig c = Config(256);
    c.seed = engine_seed;
    auto engine = NewEngine(TestProfile(), c);
    auto spec = Req("a", Seq(30), 64, /*ignore_eos=*/false);
    spec.seed = req_seed;
    EXPECT_FALSE(engine->Add(spec));
    Trace run;
    Drive(*engine, &run);
    return run.tokens["a"];
  };
  EXPECT_EQ(run_once(1, 7), run_once(1, 7));
  EXPECT_NE(run_once(1, 7), run_once(1, 8));
  EXPECT_NE(run_once(1, 7), run_once(2, 7));
}

TEST(EngineSchedTest, WithoutIgnoreEosStopsAtASeededLengthWithinMaxTokens) {
  auto engine = NewEngine(TestProfile(), Config(4096));
  std::set<std::size_t> lengths;
  for (int i = 0; i < 20; ++i) {
    auto spec = Req("r" + std::to_string(i), Seq(20, 100 + i), 50, /*ignore_eos=*/false);
    ASSERT_FALSE(engine->Add(spec));
  }
  Trace run;
  Drive(*engine, &run);
  for (int i = 0; i < 20; ++i) {
    const std::string id = "r" + std::to_string(i);
    const std::size_t n = run.tokens[id].size();
    EXPECT_GE(n, 1u);
    EXPECT_LE(n, 50u);
    EXPECT_EQ(run.finish[id], FinishReason::kStop);
    lengths.insert(n);
  }
  EXPECT_GT(lengths.size(), 5u);  // lengths vary with the prompt
}

TEST(EngineSchedTest, WithIgnoreEosRunsToMaxTokens) {
  auto engine = NewEngine(TestProfile(), Config(256));
  ASSERT_FALSE(engine->Add(Req("a", Seq(20), 33, /*ignore_eos=*/true)));
  Trace run;
  Drive(*engine, &run);
  EXPECT_EQ(run.tokens["a"].size(), 33u);
  EXPECT_EQ(run.finish["a"], FinishReason::kLength);
  EXPECT_EQ(engine->Stats().generation_tokens, 33u);
  EXPECT_EQ(engine->Stats().prompt_tokens, 20u);
}

TEST(EngineSchedTest, OutputTokensComeFromTheConfiguredPalette) {
  EngineConfig c = Config(256);
  c.output_vocabulary = {7, 11, 13};
  auto engine = NewEngine(TestProfile(), c);
  ASSERT_FALSE(engine->Add(Req("a", Seq(20), 40)));
  Trace run;
  Drive(*engine, &run);
  for (TokenId t : run.tokens["a"]) EXPECT_TRUE(t == 7 || t == 11 || t == 13) << t;
  auto dflt = NewEngine(TestProfile(), Config(256));
  ASSERT_FALSE(dflt->Add(Req("a", Seq(20), 40)));
  Trace run2;
  Drive(*dflt, &run2);
  for (TokenId t : run2.tokens["a"]) {
    EXPECT_GE(t, 1000u);
    EXPECT_LE(t, 1999u);
  }
}

TEST(EngineSchedTest, StepDurationIsTheRooflinePrediction) {
  const Profile p = TestProfile();
  const StepTimeModel model(p);
  auto engine = NewEngine(p, Config(256));
  ASSERT_FALSE(engine->Add(Req("a", Seq(500), 2)));
  const StepResult first = engine->Step(Nanos(0));
  EXPECT_EQ(first.duration, model.PrefillTime(500, 0));
  const StepResult second = engine->Step(first.duration);
  EXPECT_EQ(second.duration, model.DecodeStepTime(1, 500));
}

TEST(EngineSchedTest, IdleEngineHasNoWorkAndZeroDuration) {
  auto engine = NewEngine(TestProfile(), Config(16));
  EXPECT_FALSE(engine->HasWork());
  EXPECT_EQ(engine->Step(Nanos(0)).duration.count(), 0);
}

// StepInto into one reused result gives exactly what Step returns, step by step, through
// prefix hits, chunked prefill, preemption, evictions (KV events), an abort and a reset.
TEST(EngineSchedTest, StepIntoAReusedResultMatchesStep) {
  auto fresh = NewEngine(TestProfile(), Config(12, 48, 3));
  auto reused = NewEngine(TestProfile(), Config(12, 48, 3));
  auto add = [&](const RequestSpec& spec) { EXPECT_EQ(fresh->Add(spec), reused->Add(spec)); };
  add(Req("a", Seq(70, 1), 20));
  add(Req("b", Seq(70, 1), 12));  // shares a's prefix
  add(Req("c", Seq(40, 3000), 30));
  add(Req("d", Seq(33, 7000), 9));
  StepResult into;
  Nanos now{0};
  for (int step = 0; step < 400 && fresh->HasWork(); ++step) {
    if (step == 5) {
      fresh->Abort("d");
      reused->Abort("d");
    }
    const StepResult want = fresh->Step(now);
    reused->StepInto(now, &into);
    ASSERT_EQ(into.duration, want.duration) << "step " << step;
    ASSERT_EQ(into.tokens.size(), want.tokens.size()) << "step " << step;
    for (std::size_t i = 0; i < want.tokens.size(); ++i) {
      EXPECT_EQ(into.tokens[i].request_id, want.tokens[i].request_id);
      EXPECT_EQ(into.tokens[i].token, want.tokens[i].token);
      EXPECT_EQ(into.tokens[i].is_first, want.tokens[i].is_first);
      EXPECT_EQ(into.tokens[i].finished, want.tokens[i].finished);
      EXPECT_EQ(into.tokens[i].cached_tokens, want.tokens[i].cached_tokens);
    }
    EXPECT_EQ(into.finished_without_token, want.finished_without_token);
    EXPECT_EQ(into.kv_events, want.kv_events) << "step " << step;
    EXPECT_EQ(into.num_prefill_tokens, want.num_prefill_tokens);
    EXPECT_EQ(into.num_decode_tokens, want.num_decode_tokens);
    now += want.duration;
  }
  EXPECT_FALSE(reused->HasWork());
  EXPECT_GT(reused->Stats().num_preemptions, 0u);
  EXPECT_EQ(reused->Stats().num_preemptions, fresh->Stats().num_preemptions);
  ASSERT_TRUE(fresh->ResetPrefixCache() && reused->ResetPrefixCache());
  const StepResult cleared = fresh->Step(now);
  reused->StepInto(now, &into);
  EXPECT_EQ(into.kv_events, cleared.kv_events);
  EXPECT_TRUE(into.tokens.empty());
  EXPECT_EQ(into.duration, Nanos(0));
}

}  // namespace
}  // namespace kvroute::engine
