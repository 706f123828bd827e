// The disk tier and the shared-store tier of the engine model (README.md "KV tiers"): the host
// tier spills its LRU victims to disk, each tier evicts its own least recently used block with
// its own medium, hits load back at the tier's bandwidth and latency (tiers in parallel), every
// computed block is written through to the store, and a second engine sharing the store gets
// a conversation it never computed from it. The event stream mirrors the local tiers under
// random load.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/lru_tier.h"
#include "engine/step_time.h"

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

// A store with no capacity limit that records what it was offered: the engine's side of the
// contract only (the real store's LRU and TTL are src/store/'s tests).
class FakeStore : public SharedKvStore {
 public:
  std::size_t Match(std::span<const kv::EngineHash> hashes, Nanos) override {
    ++matches;
    std::size_t n = 0;
    while (n < hashes.size() && held.contains(hashes[n])) ++n;
    return n;
  }
  void Put(std::span<const BlockMeta> blocks, Nanos) override {
    for (const BlockMeta& b : blocks) {
      ASSERT_NE(b.payload, nullptr) << "a put must carry the block's tokens";
      ++puts[b.hash];
      held.insert(b.hash);
    }
  }
  std::set<kv::EngineHash> held;
  std::map<kv::EngineHash, int> puts;
  int matches = 0;
};

std::vector<kv::EngineHash> RemovedOn(const std::vector<kv::KvEvent>& events,
                                      const std::string& medium) {
  std::vector<kv::EngineHash> out;
  for (const auto& r : EventsOf<kv::BlockRemoved>(events)) {
    if (r.medium == medium) out.insert(out.end(), r.block_hashes.begin(), r.block_hashes.end());
  }
  return out;
}

BlockMeta Meta(kv::BlockKey key) {
  BlockMeta m;
  m.key = key;
  m.hash = key + 1000;
  m.payload = std::make_shared<const BlockPayload>(BlockPayload{.tokens = Seq(16)});
  return m;
}

TEST(LruTierTest, SpillsItsVictimToTheNextTierBeforeRemovingIt) {
  LruTier disk(2, 16, "DISK");
  LruTier host(1, 16, "CPU", &disk);
  std::vector<kv::KvEvent> ev;
  host.Insert(Meta(1), &ev);
  host.Insert(Meta(2), &ev);  // 1 goes to disk
  ASSERT_EQ(ev.size(), 4u);
  // CPU stored 1; DISK stored 1, CPU removed 1 (in that order: never held nowhere); CPU stored 2.
  EXPECT_EQ(std::get<kv::BlockStored>(ev[1]).medium, "DISK");
  EXPECT_EQ(std::get<kv::BlockRemoved>(ev[2]).medium, "CPU");
  EXPECT_EQ(std::get<kv::BlockRemoved>(ev[2]).block_hashes[0], 1001u);
  EXPECT_EQ(std::get<kv::BlockStored>(ev[3]).medium, "CPU");
  EXPECT_NE(disk.Find(1), nullptr);
  EXPECT_EQ(host.Find(1), nullptr);
  EXPECT_EQ(host.counters().evicted, 1u);
  EXPECT_EQ(disk.counters().stored, 1u);
}

TEST(LruTierTest, DiskEvictsItsLeastRecentlyUsedBlockWithADiskRemoval) {
  LruTier disk(2, 16, "DISK");
  std::vector<kv::KvEvent> ev;
  disk.Insert(Meta(1), &ev);
  disk.Insert(Meta(2), &ev);
  disk.Touch(1);  // 2 is now the LRU
  disk.Insert(Meta(3), &ev);
  EXPECT_EQ(RemovedOn(ev, "DISK"), std::vector<kv::EngineHash>{1002});
  EXPECT_NE(disk.Find(1), nullptr);
  EXPECT_EQ(disk.Find(2), nullptr);
  EXPECT_EQ(disk.size(), 2);
}

TEST(LruTierTest, AWriteBacklogLongerThanTheLimitDropsTheCopyInsteadOfWaiting) {
  LruTier disk(100, 16, "DISK");
  // 1 MB per block at 1 MB/s: each copy takes 1 s; a backlog of 2.5 s admits 3 at once.
  disk.SetWriteModel(1e6, 1e6, std::chrono::milliseconds(2500));
  disk.SetNow(Nanos(0));
  std::vector<kv::KvEvent> ev;
  for (kv::BlockKey k = 1; k <= 5; ++k) disk.Insert(Meta(k), &ev);
  EXPECT_EQ(disk.size(), 3);
  EXPECT_EQ(disk.counters().dropped_writes, 2u);
  disk.SetNow(std::chrono::seconds(10));  // the drive caught up
  disk.Insert(Meta(9), &ev);
  EXPECT_EQ(disk.size(), 4);
}

TEST(EngineTiersTest, GpuEvictionsCascadeThroughHostToDisk) {
  // 4 GPU blocks, 1 host block, 8 disk blocks: a second conversation evicts the first from
  // GPU; the host keeps one block and spills the rest to disk.
  auto engine = NewEngine(TestProfile(), BlocksConfig(4, 1, 8));
  Trace run;
  ASSERT_FALSE(engine->Add(Req("a", Seq(48), 1)));  // 3 full blocks cached
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("b", Seq(48, 5000), 1)));
  Drive(*engine, &run);
  const EngineStats s = engine->Stats();
  EXPECT_EQ(engine->CachedBlockHashes(kv::Tier::kCpu).size(), 1u);
  EXPECT_EQ(engine->CachedBlockHashes(kv::Tier::kDisk).size(), 1u);
  EXPECT_EQ(s.tier_blocks[static_cast<int>(Tier::kDisk)], 1);
  EXPECT_EQ(s.tier_evictions[static_cast<int>(Tier::kGpu)], 2u);
  EXPECT_EQ(s.tier_evictions[static_cast<int>(Tier::kCpu)], 1u);
  EXPECT_EQ(s.num_disk_blocks, 8);
  EXPECT_EQ(EventsOf<kv::BlockStored>(run.events).size(), 2u + 2u + 1u)
      << "2 GPU batches (a, b), 2 CPU stores, 1 DISK store";
}

TEST(EngineTiersTest, WithoutAHostTierGpuEvictionsGoStraightToDisk) {
  auto engine = NewEngine(TestProfile(), BlocksConfig(4, 0, 8));
  Trace run;
  ASSERT_FALSE(engine->Add(Req("a", Seq(48), 1)));
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("b", Seq(48, 5000), 1)));
  Drive(*engine, &run);
  EXPECT_EQ(engine->CachedBlockHashes(kv::Tier::kDisk).size(), 2u);
  ASSERT_FALSE(engine->Add(Req("a2", Seq(48), 1)));
  Drive(*engine, &run);
  // a2's hit is a's chain as GPU (what b left) and disk (what b evicted) hold it.
  const EngineStats s = engine->Stats();
  EXPECT_GT(s.tier_hit_tokens[static_cast<int>(Tier::kDisk)], 0u);
  EXPECT_EQ(s.tier_hit_tokens[static_cast<int>(Tier::kDisk)] +
                s.tier_hit_tokens[static_cast<int>(Tier::kGpu)],
            run.cached["a2"]);
  EXPECT_EQ(run.cached["a2"], 32u);  // 2 of 3 blocks: the last token is always recomputed
}

TEST(EngineTiersTest, ADiskHitCostsLatencyPlusBytesOverTheReadBandwidth) {
  const Profile profile = TestProfile();
  EngineConfig c = BlocksConfig(4, 0, 8);
  c.disk.read_bytes_per_s = 1e9;
  c.disk.latency_s = 0.004;
  auto engine = NewEngine(profile, c);
  Trace run;
  ASSERT_FALSE(engine->Add(Req("a", Seq(48), 1)));
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("b", Seq(48, 7000), 1)));
  Drive(*engine, &run);
  ASSERT_FALSE(engine->Add(Req("a2", Seq(48), 1)));
  const StepResult r = engine->Step(run.now);
  // b evicted some of a's blocks to disk; count the disk hit instead of assuming which:
  // load = latency + disk blocks × block bytes / bandwidth.
  const EngineStats s = engine->Stats();
  const std::uint64_t disk_tokens = s.tier_hit_tokens[static_cast<int>(Tier::kDisk)];
  ASSERT_GT(disk_tokens, 0u);
  // a2's hit (a and b had none).
  const std::uint64_t hit = s.tier_hit_tokens[static_cast<int>(Tier::kGpu)] + disk_tokens;
  const StepTimeModel model(profile);
  const Nanos compute = model.PrefillTime(48 - static_cast<std::uint32_t>(hit), hit);
  const double load_s = 0.004 + disk_tokens * model.KvBytesPerTokenTransfer() / 1e9;
  EXPECT_NEAR(ToSeconds(r.duration), ToSeconds(compute) + load_s, 1e-6);
  EXPECT_NEAR(s.tier_load_bytes[static_cast<int>(Tier::kDisk)],
              disk_tokens * model.KvBytesPerTokenTransfer(), 1.0);
}

TEST(EngineTiersTest, LoadsFromSeveralTiersRunInParallel) {
  // Host at 1 GB/s, disk at 1 GB/s + 4 ms: a hit spanning both waits for the slower alone.
  const Profile profile = TestProfile();
  EngineConfig c = BlocksConfig(6, 1, 8);
  c.cpu_to_gpu_bandwidth_bytes_per_s = 1e9;
  c.disk.read_bytes_per_s = 1e9;
  c.disk.latency_s = 0.004;
  auto engine = NewEngine(profile, c);
  Trace run;
  ASSERT_FALSE(engine->Add(Req("a", Seq(64), 1)));  // 4 full blocks cached
  Drive(*engine, &run);
  // b's 6 blocks evict a's blocks: the last one evicted stays on the host, the earlier ones
  // spill to disk (which blocks depends on the free queue's order; counted below).
  ASSERT_FALSE(engine->Add(Req("b", Seq(80, 7000), 1)));
  Drive(*engine, &run);
  const EngineStats before = engine->Stats();
  ASSERT_FALSE(engine->Add(Req("a2", Seq(64), 1)));
  const StepResult r = engine->Step(run.now);
  const EngineStats after = engine->Stats();
  const auto delta = [&](Tier t) {
    return after.tier_hit_tokens[static_cast<int>(t)] - before.tier_hit_tokens[static_cast<int>(t)];
  };
  const std::uint64_t cpu = delta(Tier::kCpu), disk = delta(Tier::kDisk), gpu = delta(Tier::kGpu);
  ASSERT_GT(cpu, 0u);
  ASSERT_GT(disk, 0u);
  const StepTimeModel model(profile);
  const double bpt = model.KvBytesPerTokenTransfer();
  const double load_s = std::max(cpu * bpt / 1e9, 0.004 + disk * bpt / 1e9);
  const std::uint64_t hit = gpu + cpu + disk;
  ASSERT_EQ(hit, 48u);  // 3 of 4 blocks: the last token is always recomputed
  const Nanos compute = model.PrefillTime(16, 48);
  EXPECT_NEAR(ToSeconds(r.duration), ToSeconds(compute) + load_s, 1e-6);
}

TEST(EngineTiersTest, EveryComputedBlockIsWrittenThroughToTheStoreOnce) {
  auto store = std::make_shared<FakeStore>();
  EngineConfig c = BlocksConfig(64, 0, 0);
  c.shared.store = store;
  auto engine = NewEngine(TestProfile(), c);
  Trace run;
  ASSERT_FALSE(engine->Add(Req("a", Seq(70), 20)));  // 90 tokens: 5 full blocks in the end
  Drive(*engine, &run);
  EXPECT_EQ(store->held.size(), 5u);
  for (const auto& [hash, n] : store->puts) EXPECT_EQ(n, 1) << hash;
  // A GPU hit is not offered again, and the engine never announces the shared tier itself.
  ASSERT_FALSE(engine->Add(Req("a2", Seq(70), 1)));
  Drive(*engine, &run);
  for (const auto& [hash, n] : store->puts) EXPECT_EQ(n, 1) << hash;
  for (const auto& s : EventsOf<kv::BlockStored>(run.events)) EXPECT_EQ(s.medium, "GPU");
}

TEST(EngineTiersTest, ASecondEngineLoadsAConversationItNeverComputedFromTheStore) {
  const Profile profile = TestProfile();
  auto store = std::make_shared<FakeStore>();
  EngineConfig c = BlocksConfig(64, 0, 0);
  c.shared.store = store;
  c.shared.read_bytes_per_s = 1e9;
  c.shared.latency_s = 0.002;
  auto a = NewEngine(profile, c);
  auto b = NewEngine(profile, c);
  Trace run_a, run_b;
  ASSERT_FALSE(a->Add(Req("conv", Seq(64), 1)));
  Drive(*a, &run_a);
  ASSERT_FALSE(b->Add(Req("conv", Seq(64), 1)));
  const StepResult r = b->Step(Nanos(0));
  ASSERT_EQ(r.tokens.size(), 1u);
  EXPECT_EQ(r.tokens[0].cached_tokens, 48u);  // 3 of 4 blocks: the last token is recomputed
  const EngineStats s = b->Stats();
  EXPECT_EQ(s.tier_hit_tokens[static_cast<int>(Tier::kShared)], 48u);
  EXPECT_EQ(s.prefix_cache_hits, 48u);
  const StepTimeModel model(profile);
  const double load_s = 0.002 + 48 * model.KvBytesPerTokenTransfer() / 1e9;
  EXPECT_NEAR(ToSeconds(r.duration), ToSeconds(model.PrefillTime(16, 48)) + load_s, 1e-6);
  // The loaded blocks are announced on B's GPU like any cached block.
  const auto stored = EventsOf<kv::BlockStored>(r.kv_events);
  ASSERT_FALSE(stored.empty());
  EXPECT_EQ(stored[0].medium, "GPU");
  EXPECT_EQ(stored[0].block_hashes.size(), 3u);
}

TEST(EngineTiersTest, AStoreThatLostTheBlocksGivesNoHit) {
  auto store = std::make_shared<FakeStore>();
  EngineConfig c = BlocksConfig(64, 0, 0);
  c.shared.store = store;
  auto a = NewEngine(TestProfile(), c);
  auto b = NewEngine(TestProfile(), c);
  Trace run_a, run_b;
  ASSERT_FALSE(a->Add(Req("conv", Seq(64), 1)));
  Drive(*a, &run_a);
  store->held.clear();  // the store restarted empty
  ASSERT_FALSE(b->Add(Req("conv", Seq(64), 1)));
  Drive(*b, &run_b);
  EXPECT_EQ(run_b.cached["conv"], 0u);
  EXPECT_EQ(b->Stats().tier_hit_tokens[static_cast<int>(Tier::kShared)], 0u);
}

// Applying every event to one set per local tier reproduces CachedBlockHashes(tier) after
// every step, with host and disk tiers under random load (engine_events_test.cc does GPU+CPU).
void CheckEventStreamMirrorsEveryLocalTier(bool async_tier_loads) {
  std::mt19937 rng(7);
  EngineConfig c = BlocksConfig(30, 8, 16);
  c.async_tier_loads = async_tier_loads;
  c.max_num_batched_tokens = 96;
  c.max_num_seqs = 6;
  c.shared.store = std::make_shared<FakeStore>();
  auto engine = NewEngine(TestProfile(), c);
  std::map<std::string, std::set<kv::EngineHash>> mirror;
  int disk_removals = 0;
  Nanos now{0};
  for (int step = 0; step < 1500; ++step) {
    if (step < 1200 && rng() % 2 == 0) {
      std::vector<TokenId> prompt = Seq(16 * (1 + rng() % 3), 10000 * (1 + rng() % 5));
      for (std::size_t k = rng() % 60; k > 0; --k) prompt.push_back(rng() % 50);
      (void)engine->Add(Req("r" + std::to_string(step), prompt, 1 + rng() % 40));
    }
    const StepResult r = engine->Step(now);
    now += r.duration + std::chrono::milliseconds(1);
    for (const kv::KvEvent& e : r.kv_events) {
      if (const auto* s = std::get_if<kv::BlockStored>(&e)) {
        for (auto h : s->block_hashes) ASSERT_TRUE(mirror[*s->medium].insert(h).second) << step;
      } else if (const auto* rm = std::get_if<kv::BlockRemoved>(&e)) {
        disk_removals += *rm->medium == "DISK" ? 1 : 0;
        for (auto h : rm->block_hashes) ASSERT_EQ(mirror[*rm->medium].erase(h), 1u) << step;
      }
    }
    for (auto [tier, name] : {std::pair{kv::Tier::kGpu, "GPU"}, {kv::Tier::kCpu, "CPU"},
                              {kv::Tier::kDisk, "DISK"}}) {
      const auto held = engine->CachedBlockHashes(tier);
      ASSERT_EQ(mirror[name], std::set<kv::EngineHash>(held.begin(), held.end()))
          << name << " step " << step;
    }
  }
  EXPECT_GT(disk_removals, 0);
  EXPECT_GT(engine->Stats().tier_hit_tokens[static_cast<int>(Tier::kDisk)], 0u);
  EXPECT_GT(engine->Stats().tier_hit_tokens[static_cast<int>(Tier::kShared)], 0u);
}

TEST(EngineTiersTest, EventStreamMirrorsEveryLocalTierUnderRandomLoad) {
  CheckEventStreamMirrorsEveryLocalTier(false);
}

// Loads that finish while other requests run (and allocate, evict, spill) keep the mirror.
TEST(EngineTiersTest, EventStreamMirrorsEveryLocalTierWithAsyncLoads) {
  CheckEventStreamMirrorsEveryLocalTier(true);
}

}  // namespace
}  // namespace kvroute::engine
