// The engine's KV cache as seen from outside: prefix hits, events, eviction order, the CPU
// tier, capacity.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/step_time.h"
#include "kv/keys/block_key.h"
#include "kv/keys/vllm_hash.h"

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

std::vector<kv::EngineHash> VllmLow64(const std::vector<TokenId>& tokens,
                                      std::string_view lora = {}, std::string_view salt = {}) {
  std::vector<kv::EngineHash> out;
  for (const auto& d : kv::VllmBlockHashes(tokens, 16, kv::VllmNoneHash("0"),
                                           {.lora_name = lora, .cache_salt = salt})) {
    out.push_back(d.Low64());
  }
  return out;
}

TEST(EngineKvTest, RepeatedPromptHitsThePrefixCacheUpToOneTokenShort) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(64));
  ASSERT_FALSE(engine->Add(Req("a", Seq(64), 1)));
  Trace run;
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("b", Seq(64), 1)));
  Drive(*engine, &run);
  EXPECT_EQ(run.cached["a"], 0u);
  // 64 tokens = 4 full blocks, but the last token is always recomputed: 3 blocks hit.
  EXPECT_EQ(run.cached["b"], 48u);
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.prefix_cache_queries, 128u);
  EXPECT_EQ(s.prefix_cache_hits, 48u);
}

TEST(EngineKvTest, PromptBlockStoredCarriesEveryVllmField) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(64));
  ASSERT_FALSE(engine->Add(Req("a", Seq(40), 1)));  // 2 full blocks + 8 tokens
  Trace run;
  Drive(*engine, &run);
  const auto stored = EventsOf<kv::BlockStored>(run.events);
  ASSERT_EQ(stored.size(), 1u);
  const kv::BlockStored& ev = stored[0];
  // Golden values from shared/reference/vllm-protocol.md §2.1 (PYTHONHASHSEED=0).
  EXPECT_EQ(ev.block_hashes,
            (std::vector<kv::EngineHash>{3236607068019569386ULL, 2758186210834249151ULL}));
  EXPECT_EQ(ev.block_hashes, VllmLow64(Seq(32)));
  EXPECT_FALSE(ev.parent_block_hash.has_value());
  EXPECT_EQ(ev.token_ids, Seq(32));
  EXPECT_EQ(ev.block_size, 16u);
  EXPECT_EQ(ev.medium, "GPU");
  EXPECT_FALSE(ev.lora_name.has_value());
  EXPECT_FALSE(ev.lora_id.has_value());
  EXPECT_EQ(ev.group_idx, 0);
  EXPECT_EQ(ev.kv_cache_spec_kind, "full_attention");
  EXPECT_TRUE(EventsOf<kv::BlockRemoved>(run.events).empty());
}

TEST(EngineKvTest, DecodeTokensThatFillABlockAreStoredToo) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(64));
  ASSERT_FALSE(engine->Add(Req("a", Seq(10), 20)));
  Trace run;
  Drive(*engine, &run);
  const auto stored = EventsOf<kv::BlockStored>(run.events);
  // 10 prompt + 20 output tokens; the last one's KV is never computed: 29 tokens, 1 block.
  ASSERT_EQ(stored.size(), 1u);
  std::vector<TokenId> seq = Seq(10);
  seq.insert(seq.end(), run.tokens["a"].begin(), run.tokens["a"].begin() + 6);
  EXPECT_EQ(stored[0].token_ids, seq);
  EXPECT_EQ(stored[0].block_hashes, VllmLow64(seq));
  EXPECT_FALSE(stored[0].parent_block_hash.has_value());
}

TEST(EngineKvTest, ExtendingRequestStoresOnlyNewBlocksWithTheParentHash) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(64));
  ASSERT_FALSE(engine->Add(Req("a", Seq(32), 1)));
  Trace run;
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("b", Seq(49), 1)));  // 32 cached + one new block + 1 token
  Trace run_b;
  Drive(*engine, &run_b);
  const auto stored = EventsOf<kv::BlockStored>(run_b.events);
  ASSERT_EQ(stored.size(), 1u);
  const auto all = VllmLow64(Seq(48));
  EXPECT_EQ(stored[0].block_hashes, (std::vector<kv::EngineHash>{all[2]}));
  EXPECT_EQ(stored[0].parent_block_hash, all[1]);
  EXPECT_EQ(stored[0].token_ids, Seq(16, 33));
  EXPECT_EQ(run_b.cached["b"], 32u);
}

TEST(EngineKvTest, LoraNameAndCacheSaltEnterHashesAndEvents) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(64));
  auto spec = Req("a", Seq(32), 1);
  spec.lora_name = "sql-adapter";
  spec.cache_salt = "tenant-7";
  ASSERT_FALSE(engine->Add(spec));
  Trace run;
  Drive(*engine, &run);
  const auto stored = EventsOf<kv::BlockStored>(run.events);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].lora_name, "sql-adapter");
  EXPECT_EQ(stored[0].block_hashes, VllmLow64(Seq(32), "sql-adapter", "tenant-7"));
  EXPECT_NE(stored[0].block_hashes, VllmLow64(Seq(32)));
  // The event carries what vLLM hashed, block by block (vLLM ≥ PR #33304).
  ASSERT_TRUE(stored[0].extra_keys.has_value());
  EXPECT_EQ(*stored[0].extra_keys,
            (std::vector<kv::BlockExtraKeys>{
                {kv::ExtraKey::Text("sql-adapter"), kv::ExtraKey::Text("tenant-7")},
                {kv::ExtraKey::Text("sql-adapter")}}));
  // The same tokens without the salt do not hit.
  ASSERT_FALSE(engine->Add(Req("b", Seq(33), 1)));
  Drive(*engine, &run);
  EXPECT_EQ(run.cached["b"], 0u);
}

TEST(EngineKvTest, AnImageEntersTheBlocksItOverlapsAndOnlyTheSameImageHits) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(64));
  auto with = [](std::string id, std::string image) {
    auto spec = Req(std::move(id), Seq(49), 1);
    spec.mm_items = {{.identifier = std::move(image), .offset = 20, .length = 12}};
    return spec;
  };
  ASSERT_FALSE(engine->Add(with("a", "img-a")));
  Trace run;
  Drive(*engine, &run);
  const auto stored = EventsOf<kv::BlockStored>(run.events);
  ASSERT_EQ(stored.size(), 1u);
  ASSERT_TRUE(stored[0].extra_keys.has_value());
  EXPECT_EQ(*stored[0].extra_keys,
            (std::vector<kv::BlockExtraKeys>{{}, {kv::ExtraKey::Mm("img-a", 4)}, {}}));
  std::vector<kv::EngineHash> expected;
  const std::vector<kv::MmItem> items = {{.identifier = "img-a", .offset = 20, .length = 12}};
  for (const auto& d :
       kv::VllmBlockHashes(Seq(49), 16, kv::VllmNoneHash("0"), {.mm_items = items})) {
    expected.push_back(d.Low64());
  }
  EXPECT_EQ(stored[0].block_hashes, expected);
  ASSERT_FALSE(engine->Add(with("b", "img-a")));
  ASSERT_FALSE(engine->Add(with("c", "img-b")));
  Drive(*engine, &run);
  EXPECT_EQ(run.cached["b"], 48u);
  EXPECT_EQ(run.cached["c"], 16u);  // block 0 lies before the image
}

TEST(EngineKvTest, PythonHashSeedChangesEventHashes) {
  EngineConfig c = BlocksConfig(64);
  c.python_hash_seed = "42";
  auto engine = NewEngine(TestProfile(), c);
  ASSERT_FALSE(engine->Add(Req("a", Seq(17), 1)));
  Trace run;
  Drive(*engine, &run);
  const auto stored = EventsOf<kv::BlockStored>(run.events);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].block_hashes[0],
            kv::VllmBlockHashes(Seq(16), 16, kv::VllmNoneHash("42"))[0].Low64());
}

TEST(EngineKvTest, BlockKeyModePutsKvrouteKeysInEvents) {
  EngineConfig c = BlocksConfig(64);
  c.event_hash = EventHash::kBlockKey;
  auto engine = NewEngine(TestProfile(), c);
  ASSERT_FALSE(engine->Add(Req("a", Seq(33), 1)));
  Trace run;
  Drive(*engine, &run);
  const auto stored = EventsOf<kv::BlockStored>(run.events);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].block_hashes, kv::BlockKeyer(16).Keys(Seq(32)));
  auto cached = engine->CachedBlockHashes(kv::Tier::kGpu);
  std::sort(cached.begin(), cached.end());
  auto want = kv::BlockKeyer(16).Keys(Seq(32));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(cached, want);
}

TEST(EngineKvTest, EvictsTailBlocksBeforeHeadBlocks) {
  // 5 blocks: "a" caches 4 and finishes; one block was never used.
  auto engine = NewEngine(TestProfile(), BlocksConfig(5));
  ASSERT_FALSE(engine->Add(Req("a", Seq(64), 1)));
  Trace run;
  Drive(*engine, &run);
  const auto a_hashes = VllmLow64(Seq(64));
  // "b" (unrelated) needs 3 blocks: the unused one, then a's tail (block 3), then block 2.
  ASSERT_FALSE(engine->Add(Req("b", Seq(33, 5000), 1)));
  Trace run_b;
  Drive(*engine, &run_b);
  const auto removed = EventsOf<kv::BlockRemoved>(run_b.events);
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0].block_hashes, (std::vector<kv::EngineHash>{a_hashes[3]}));
  EXPECT_EQ(removed[1].block_hashes, (std::vector<kv::EngineHash>{a_hashes[2]}));
  EXPECT_EQ(removed[0].medium, "GPU");
  // The head of "a" is still served from cache.
  ASSERT_FALSE(engine->Add(Req("c", Seq(40), 1)));
  Drive(*engine, &run_b);
  EXPECT_EQ(run_b.cached["c"], 32u);
}

TEST(EngineKvTest, SharedPrefixBlocksAreReferencedNotCopied) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(64));
  ASSERT_FALSE(engine->Add(Req("a", Seq(48), 8)));
  Trace run;
  StepOnce(*engine, &run);  // a prefilled: 3 blocks cached and held
  std::vector<TokenId> b = Seq(48);
  const auto extra = Seq(16, 9000);
  b.insert(b.end(), extra.begin(), extra.end());
  ASSERT_FALSE(engine->Add(Req("b", b, 8)));
  StepOnce(*engine, &run);
  // a: 3 shared + 1 decode block; b: 3 shared + its 4th block. 5 distinct blocks in use.
  EXPECT_DOUBLE_EQ(engine->Stats().kv_cache_usage, 5.0 / 64);
  Drive(*engine, &run);
  EXPECT_EQ(run.cached["b"], 48u);
  EXPECT_DOUBLE_EQ(engine->Stats().kv_cache_usage, 0.0);
}

TEST(EngineKvTest, GpuEvictionMovesBlocksToCpuAndCpuHitsComeBack) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(4, 8));
  ASSERT_FALSE(engine->Add(Req("a", Seq(48), 1)));  // caches 3 blocks
  Trace run;
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("b", Seq(48, 7000), 1)));  // needs 3: evicts a's tail two
  Trace run_b;
  Drive(*engine, &run_b);
  const auto a_hashes = VllmLow64(Seq(48));
  const auto cpu_stored = EventsOf<kv::BlockStored>(run_b.events);
  std::vector<kv::EngineHash> to_cpu;
  for (const auto& ev : cpu_stored) {
    if (ev.medium == "CPU") {
      ASSERT_EQ(ev.block_hashes.size(), 1u);
      to_cpu.push_back(ev.block_hashes[0]);
      EXPECT_EQ(ev.token_ids.size(), 16u);
    }
  }
  EXPECT_EQ(to_cpu, (std::vector<kv::EngineHash>{a_hashes[2], a_hashes[1]}));
  auto cpu = engine->CachedBlockHashes(kv::Tier::kCpu);
  EXPECT_EQ(cpu.size(), 2u);

  // "a" again: block 0 from GPU, block 1 from CPU (block 2 is the capped last block).
  ASSERT_FALSE(engine->Add(Req("a2", Seq(48), 1)));
  Trace run_a2;
  Drive(*engine, &run_a2);
  EXPECT_EQ(run_a2.cached["a2"], 32u);
  EXPECT_EQ(engine->Stats().cpu_cache_hits, 16u);
  // The loaded block is announced on GPU again, with its parent.
  bool reloaded = false;
  for (const auto& ev : EventsOf<kv::BlockStored>(run_a2.events)) {
    if (ev.medium == "GPU" && ev.block_hashes.front() == a_hashes[1]) {
      reloaded = true;
      EXPECT_EQ(ev.parent_block_hash, a_hashes[0]);
      EXPECT_EQ(ev.token_ids, Seq(16, 17));
    }
  }
  EXPECT_TRUE(reloaded);
  // The CPU copy stays (documented choice).
  cpu = engine->CachedBlockHashes(kv::Tier::kCpu);
  EXPECT_NE(std::find(cpu.begin(), cpu.end(), a_hashes[1]), cpu.end());
}

TEST(EngineKvTest, CpuHitAddsLoadTimeToTheStep) {
  const Profile profile = TestProfile();
  EngineConfig c = BlocksConfig(4, 8);
  c.cpu_to_gpu_bandwidth_bytes_per_s = 1e9;  // slow link: the load dominates
  auto engine = NewEngine(profile, c);
  Trace run;
  ASSERT_FALSE(engine->Add(Req("a", Seq(48), 1)));
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("b", Seq(48, 7000), 1)));
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("a2", Seq(48), 1)));
  const StepResult r = engine->Step(run.now);
  const StepTimeModel model(profile);
  const Nanos compute = model.PrefillTime(16, 32);
  const double load_s = 16 * model.KvBytesPerTokenTransfer() / 1e9;
  EXPECT_NEAR(ToSeconds(r.duration), ToSeconds(compute) + load_s, 1e-6);
}

TEST(EngineKvTest, CpuTierEvictsItsOwnLruWithCpuRemovals) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(4, 1));
  Trace run;
  ASSERT_FALSE(engine->Add(Req("a", Seq(48), 1)));  // caches 3 blocks
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("b", Seq(48, 5000), 1)));  // evicts 2: the tier keeps 1
  Drive(*engine, &run);
  const auto removed = EventsOf<kv::BlockRemoved>(run.events);
  int cpu_removals = 0;
  for (const auto& r : removed) cpu_removals += r.medium == "CPU" ? 1 : 0;
  EXPECT_EQ(cpu_removals, 1);
  EXPECT_EQ(engine->CachedBlockHashes(kv::Tier::kCpu).size(), 1u);
}

TEST(EngineKvTest, CapacityComesFromTheProfileUnlessOverridden) {
  const Profile profile = TestProfile();
  auto engine = NewEngine(profile, EngineConfig{});
  EXPECT_EQ(engine->Stats().num_gpu_blocks, StepTimeModel(profile).NumGpuBlocks(16));
  EXPECT_EQ(engine->config().num_gpu_blocks_override, engine->Stats().num_gpu_blocks);
  auto small = NewEngine(profile, BlocksConfig(10, 3));
  EXPECT_EQ(small->Stats().num_gpu_blocks, 10);
  EXPECT_EQ(small->Stats().num_cpu_blocks, 3);
}

TEST(EngineKvTest, ResetPrefixCacheIsRefusedWhileRunningThenClearsAndAnnounces) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(64, 8));
  ASSERT_FALSE(engine->Add(Req("a", Seq(40), 4)));
  Trace run;
  StepOnce(*engine, &run);
  EXPECT_FALSE(engine->ResetPrefixCache());
  Drive(*engine, &run);
  EXPECT_FALSE(engine->CachedBlockHashes(kv::Tier::kGpu).empty());
  EXPECT_TRUE(engine->ResetPrefixCache());
  EXPECT_TRUE(engine->CachedBlockHashes(kv::Tier::kGpu).empty());
  ASSERT_TRUE(engine->HasWork());
  const StepResult r = engine->Step(run.now);
  ASSERT_EQ(r.kv_events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<kv::AllBlocksCleared>(r.kv_events[0]));
  ASSERT_FALSE(engine->Add(Req("b", Seq(40), 1)));
  Drive(*engine, &run);
  EXPECT_EQ(run.cached["b"], 0u);
}

TEST(EngineKvTest, NoEventsAndNoHitsWithPrefixCachingDisabled) {
  EngineConfig c = BlocksConfig(64);
  c.enable_prefix_caching = false;
  auto engine = NewEngine(TestProfile(), c);
  Trace run;
  ASSERT_FALSE(engine->Add(Req("a", Seq(40), 1)));
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("b", Seq(40), 1)));
  Drive(*engine, &run);
  EXPECT_TRUE(run.events.empty());
  EXPECT_EQ(run.cached["b"], 0u);
}

}  // namespace
}  // namespace kvroute::engine
