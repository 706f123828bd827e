#include "gateway/worker_registry.h"

#include <gtest/gtest.h>

#include "engine/step_time.h"

namespace kvroute::gateway {
namespace {

using std::chrono::seconds;

WorkerSpec Spec(std::string name, std::vector<std::string> models = {"m"}) {
  WorkerSpec s;
  s.name = std::move(name);
  s.base_url = "http://127.0.0.1:8001";
  s.models = std::move(models);
  return s;
}

TEST(WorkerRegistryTest, AddAssignsDenseIdsAndValidates) {
  WorkerRegistry r;
  EXPECT_EQ(r.Add(Spec("a"), seconds(0)), 0u);
  EXPECT_EQ(r.Add(Spec("b"), seconds(0)), 1u);
  EXPECT_FALSE(r.Add(Spec("a"), seconds(0)).has_value());  // duplicate name
  EXPECT_FALSE(r.Add(Spec(""), seconds(0)).has_value());
  EXPECT_FALSE(r.Add(Spec("c", {}), seconds(0)).has_value());
  WorkerSpec bad_url = Spec("d");
  bad_url.base_url = "ftp://x";
  EXPECT_FALSE(r.Add(bad_url, seconds(0)).has_value());
  WorkerSpec bad_profile = Spec("e");
  bad_profile.profile = "no-such-profile";
  EXPECT_FALSE(r.Add(bad_profile, seconds(0)).has_value());
  EXPECT_EQ(r.List().size(), 2u);
  EXPECT_EQ(r.FindByName("b"), 1u);
  EXPECT_FALSE(r.FindByName("zz").has_value());
}

TEST(WorkerRegistryTest, SnapshotFiltersByModel) {
  WorkerRegistry r;
  r.Add(Spec("a", {"m1"}), seconds(0));
  r.Add(Spec("b", {"m1", "m2"}), seconds(0));
  EXPECT_EQ(r.Snapshot(seconds(0), "m2").size(), 1u);
  EXPECT_EQ(r.Snapshot(seconds(0), "m1").size(), 2u);
  EXPECT_EQ(r.Snapshot(seconds(0), "").size(), 2u);
  EXPECT_TRUE(r.Snapshot(seconds(0), "other").empty());
}

TEST(WorkerRegistryTest, SnapshotCarriesSeededRatesAndProfileCapacity) {
  WorkerRegistry r;
  WorkerId id = *r.Add(Spec("a"), seconds(0));
  auto snaps = r.Snapshot(seconds(0), "m");
  ASSERT_EQ(snaps.size(), 1u);
  const sched::WorkerSnapshot& s = snaps[0];
  EXPECT_EQ(s.id, id);
  EXPECT_EQ(s.name, "a");
  EXPECT_TRUE(s.healthy);
  ASSERT_TRUE(s.prefill_tokens_per_s.has_value());
  EXPECT_GT(*s.prefill_tokens_per_s, 0);
  ASSERT_TRUE(s.decode_step.has_value());
  EXPECT_GT(s.decode_step->Seconds(1, 1000), 0);
  auto profile = engine::LoadProfile(engine::kDefaultProfileName);
  ASSERT_TRUE(profile.has_value());
  EXPECT_EQ(static_cast<std::int64_t>(s.kv_capacity_blocks),
            engine::StepTimeModel(*profile).NumGpuBlocks(16));
  ASSERT_TRUE(s.kv_bytes_per_block.has_value());
  EXPECT_GT(*s.kv_bytes_per_block, 0);
  EXPECT_FALSE(s.scraped.has_value());
}

TEST(WorkerRegistryTest, SnapshotReflectsLoadHealthAndDrain) {
  WorkerRegistry r({.health = {.failures_to_eject = 1}});
  WorkerId a = *r.Add(Spec("a"), seconds(0));
  WorkerId b = *r.Add(Spec("b"), seconds(0));
  r.load().OnRouted(1, {.worker = a, .prompt_tokens = 100, .uncached_tokens = 60, .kv_blocks = 7},
                    seconds(0));
  r.health().OnFailure(b, seconds(0));
  auto snaps = r.Snapshot(seconds(0), "m");
  ASSERT_EQ(snaps.size(), 2u);
  EXPECT_EQ(snaps[0].inflight_requests, 1u);
  EXPECT_EQ(snaps[0].pending_prefill_tokens, 60u);
  EXPECT_EQ(snaps[0].active_kv_blocks, 7u);
  EXPECT_FALSE(snaps[1].healthy);
  r.health().SetDraining(a, true);
  EXPECT_TRUE(r.Snapshot(seconds(0), "m")[0].draining);
}

TEST(WorkerRegistryTest, ScrapedMetricsCarryAgeAndExpire) {
  WorkerRegistry r({.metrics_max_age = seconds(10)});
  WorkerId a = *r.Add(Spec("a"), seconds(0));
  EngineMetrics m;
  m.scraped_at = seconds(100);
  m.num_waiting = 3;
  m.kv_usage = 0.5;
  m.num_gpu_blocks = 1234;
  m.block_size = 16;
  r.SetMetrics(a, m);
  auto s = r.Snapshot(seconds(104), "m")[0];
  ASSERT_TRUE(s.scraped.has_value());
  EXPECT_DOUBLE_EQ(s.scraped->age_s, 4.0);
  EXPECT_EQ(s.scraped->num_waiting, 3u);
  EXPECT_EQ(s.kv_capacity_blocks, 1234u);  // the engine's own number wins
  s = r.Snapshot(seconds(111), "m")[0];
  EXPECT_FALSE(s.scraped.has_value());     // too old to trust
  EXPECT_EQ(s.kv_capacity_blocks, 1234u);  // configuration does not expire
}

TEST(WorkerRegistryTest, CapacityInAnotherBlockSizeIsNotUsed) {
  WorkerRegistry r;
  WorkerSpec spec = Spec("a");
  spec.kv_capacity_blocks = 500;
  WorkerId a = *r.Add(spec, seconds(0));
  EngineMetrics m;
  m.num_gpu_blocks = 9999;
  m.block_size = 32;
  r.SetMetrics(a, m);
  EXPECT_EQ(r.Snapshot(seconds(0), "m")[0].kv_capacity_blocks, 500u);
}

TEST(WorkerRegistryTest, RemoveForgetsEverything) {
  WorkerRegistry r;
  WorkerId a = *r.Add(Spec("a"), seconds(0));
  r.load().OnRouted(1, {.worker = a, .prompt_tokens = 10, .uncached_tokens = 10, .kv_blocks = 1},
                    seconds(0));
  EXPECT_TRUE(r.Remove(a));
  EXPECT_FALSE(r.Remove(a));
  EXPECT_TRUE(r.Snapshot(seconds(0), "").empty());
  EXPECT_EQ(r.load().inflight(), 0u);
  EXPECT_FALSE(r.rates().Estimate(a).has_value());
  EXPECT_EQ(r.health().Status(a, seconds(0)).state, HealthState::kRemoved);
  EXPECT_FALSE(r.Find(a).has_value());
}

}  // namespace
}  // namespace kvroute::gateway
