// RouterState: the worker table, the snapshot's sources of truth, booking, and the peer
// prior. The incremental Refresh against Snapshot: snapshot_cache_test.cc.
#include "fleet/router_state.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "engine/step_time.h"

namespace kvroute::fleet {
namespace {

using std::chrono::seconds;

WorkerSpec Spec(std::string name, std::vector<std::string> models = {"m"}) {
  WorkerSpec s;
  s.name = std::move(name);
  s.base_url = "http://127.0.0.1:8001";
  s.models = std::move(models);
  return s;
}

TEST(RouterStateTest, AddAssignsDenseIdsAndValidates) {
  RouterState r;
  EXPECT_EQ(r.Add(Spec("a"), seconds(0)), 0u);
  EXPECT_EQ(r.Add(Spec("b"), seconds(0)), 1u);
  EXPECT_FALSE(r.Add(Spec("a"), seconds(0)).has_value());  // duplicate name
  EXPECT_FALSE(r.Add(Spec(""), seconds(0)).has_value());
  EXPECT_FALSE(r.Add(Spec("c", {}), seconds(0)).has_value());
  // The base URL is the drivers' (validated with the config), not read here.
  WorkerSpec bad_profile = Spec("e");
  bad_profile.profile = "no-such-profile";
  EXPECT_FALSE(r.Add(bad_profile, seconds(0)).has_value());
  EXPECT_EQ(r.List().size(), 2u);
  EXPECT_EQ(r.FindByName("b"), 1u);
  EXPECT_FALSE(r.FindByName("zz").has_value());
}

TEST(RouterStateTest, SnapshotFiltersByModel) {
  RouterState r;
  r.Add(Spec("a", {"m1"}), seconds(0));
  r.Add(Spec("b", {"m1", "m2"}), seconds(0));
  EXPECT_EQ(r.Snapshot(seconds(0), "m2").size(), 1u);
  EXPECT_EQ(r.Snapshot(seconds(0), "m1").size(), 2u);
  EXPECT_EQ(r.Snapshot(seconds(0), "").size(), 2u);
  EXPECT_TRUE(r.Snapshot(seconds(0), "other").empty());
}

TEST(RouterStateTest, VisitSpecReadsTheStoredSpecOfAKnownWorkerOnly) {
  RouterState r;
  WorkerSpec spec = Spec("a");
  spec.base_url = "http://127.0.0.1:9123";
  WorkerId id = *r.Add(spec, seconds(0));
  std::string url;
  EXPECT_TRUE(r.VisitSpec(id, [&](const WorkerSpec& s) { url = s.base_url; }));
  EXPECT_EQ(url, "http://127.0.0.1:9123");
  int calls = 0;
  EXPECT_FALSE(r.VisitSpec(id + 1, [&](const WorkerSpec&) { ++calls; }));
  EXPECT_EQ(calls, 0);
}

TEST(RouterStateTest, AnySpecStopsAtTheFirstMatchAndIsFalseWhenNoneMatches) {
  RouterState r;
  r.Add(Spec("a", {"m1"}), seconds(0));
  r.Add(Spec("b", {"m2"}), seconds(0));
  r.Add(Spec("c", {"m2"}), seconds(0));
  int visited = 0;
  EXPECT_TRUE(r.AnySpec([&](const WorkerSpec& s) {
    ++visited;
    return s.models.front() == "m2";
  }));
  EXPECT_EQ(visited, 2);  // a, then b matched: c is not visited
  EXPECT_FALSE(r.AnySpec([](const WorkerSpec& s) { return s.models.front() == "m3"; }));
}

TEST(RouterStateTest, SnapshotCarriesSeededRatesAndProfileCapacity) {
  RouterState r;
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

TEST(RouterStateTest, SnapshotReflectsLoadHealthAndDrain) {
  RouterState r({.health = {.failures_to_eject = 1}});
  WorkerId a = *r.Add(Spec("a"), seconds(0));
  WorkerId b = *r.Add(Spec("b"), seconds(0));
  r.Book(1, {.worker = a, .prompt_tokens = 100, .uncached_tokens = 60, .kv_blocks = 7},
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

TEST(RouterStateTest, ScrapedMetricsCarryAgeAndExpire) {
  RouterState r({.metrics_max_age = seconds(10)});
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

TEST(RouterStateTest, CapacityInAnotherBlockSizeIsNotUsed) {
  RouterState r;
  WorkerSpec spec = Spec("a");
  spec.kv_capacity_blocks = 500;
  WorkerId a = *r.Add(spec, seconds(0));
  EngineMetrics m;
  m.num_gpu_blocks = 9999;
  m.block_size = 32;
  r.SetMetrics(a, m);
  EXPECT_EQ(r.Snapshot(seconds(0), "m")[0].kv_capacity_blocks, 500u);
}

TEST(RouterStateTest, RemoveForgetsEverything) {
  RouterState r;
  WorkerId a = *r.Add(Spec("a"), seconds(0));
  r.Book(1, {.worker = a, .prompt_tokens = 10, .uncached_tokens = 10, .kv_blocks = 1},
                    seconds(0));
  EXPECT_TRUE(r.Remove(a));
  EXPECT_FALSE(r.Remove(a));
  EXPECT_TRUE(r.Snapshot(seconds(0), "").empty());
  EXPECT_EQ(r.load().inflight(), 0u);
  EXPECT_FALSE(r.rates().Estimate(a).has_value());
  EXPECT_EQ(r.health().Status(a, seconds(0)).state, HealthState::kRemoved);
  EXPECT_FALSE(r.Find(a).has_value());
}

// PeerPrior: `n` requests on one worker, one after another, through the booking API: each
// prefills `tokens` at `rate` tokens/s, then decodes 8 tokens of `step_s` seconds each (a
// prefill sample at its first token, decode samples after; the pool moves at first token and
// completion, as it does for the proxy's and the simulator's requests).
void Teach(RouterState* r, WorkerId id, int n, double rate, double step_s) {
  static RequestId next = 1000;
  Nanos now = seconds(0);
  for (int i = 0; i < n; ++i) {
    const std::uint64_t tokens = 2000 + 1000 * (i % 5);
    const RequestId req = next++;
    r->Book(req, {.worker = id, .prompt_tokens = tokens, .uncached_tokens = tokens, .kv_blocks = 1},
            now);
    now += FromSeconds(static_cast<double>(tokens) / rate);
    r->OnFirstToken(req, now);
    for (int k = 0; k < 8; ++k) {
      now += FromSeconds(step_s);
      r->OnToken(req, now);
    }
    r->OnDone(req, now, true);
  }
}

const sched::WorkerSnapshot& ById(const std::vector<sched::WorkerSnapshot>& v, WorkerId id) {
  for (const auto& s : v) {
    if (s.id == id) return s;
  }
  ADD_FAILURE() << "no snapshot for worker " << id;
  return v.front();
}

TEST(RouterStateTest, UnusedWorkerBorrowsItsMeasuredPeersRates) {
  RouterState r;
  const WorkerId used = *r.Add(Spec("used"), seconds(0));
  const WorkerId idle = *r.Add(Spec("idle"), seconds(0));
  const double seed_rate = *ById(r.Snapshot(seconds(0), "m"), idle).prefill_tokens_per_s;
  // The used worker runs 10x faster than its profile (a sim at --speedup 10).
  Teach(&r, used, 50, 10 * seed_rate, 0.002);
  auto snaps = r.Snapshot(seconds(0), "m");
  const auto& u = ById(snaps, used);
  const auto& i = ById(snaps, idle);
  ASSERT_TRUE(u.prefill_tokens_per_s && i.prefill_tokens_per_s);
  EXPECT_GT(*u.prefill_tokens_per_s, 3 * seed_rate);
  EXPECT_DOUBLE_EQ(*i.prefill_tokens_per_s, *u.prefill_tokens_per_s);
  ASSERT_TRUE(u.decode_step && i.decode_step);
  EXPECT_DOUBLE_EQ(i.decode_step->Seconds(4, 100000), u.decode_step->Seconds(4, 100000));
}

TEST(RouterStateTest, WorkerWithEnoughSamplesKeepsItsOwnRates) {
  RouterState r;
  const WorkerId fast = *r.Add(Spec("fast"), seconds(0));
  const WorkerId slow = *r.Add(Spec("slow"), seconds(0));
  const double seed_rate = *ById(r.Snapshot(seconds(0), "m"), fast).prefill_tokens_per_s;
  // 2,000 samples each: far more than the peers' prior of 100, so each keeps (almost) its own.
  Teach(&r, fast, 2000, 4 * seed_rate, 0.01);
  Teach(&r, slow, 2000, seed_rate / 2, 0.04);
  auto snaps = r.Snapshot(seconds(0), "m");
  EXPECT_GT(*ById(snaps, fast).prefill_tokens_per_s, 4 * *ById(snaps, slow).prefill_tokens_per_s);
  EXPECT_GT(ById(snaps, slow).decode_step->Seconds(1, 30000),
            2 * ById(snaps, fast).decode_step->Seconds(1, 30000));
}

TEST(RouterStateTest, ScatteredRatesOfIdenticalWorkersAreShrunkTowardTheirPeers) {
  RouterState r;
  const WorkerId a = *r.Add(Spec("a"), seconds(0));
  const WorkerId b = *r.Add(Spec("b"), seconds(0));
  const double seed_rate = *ById(r.Snapshot(seconds(0), "m"), a).prefill_tokens_per_s;
  // A few dozen samples each, 1.4x apart: the scatter seen between identical simulated workers.
  Teach(&r, a, 50, 1.2 * seed_rate, 0.01);
  Teach(&r, b, 50, seed_rate / 1.2, 0.01);
  const double own_a = r.rates().Estimate(a)->prefill_tokens_per_s;
  const double own_b = r.rates().Estimate(b)->prefill_tokens_per_s;
  auto snaps = r.Snapshot(seconds(0), "m");
  const double snap_a = *ById(snaps, a).prefill_tokens_per_s;
  const double snap_b = *ById(snaps, b).prefill_tokens_per_s;
  EXPECT_GT(own_a / own_b, 1.3);
  // 50 own samples against a prior of 100: a third of the log spread is left.
  EXPECT_NEAR(std::log(snap_a / snap_b), std::log(own_a / own_b) / 3, 0.01);
}

TEST(RouterStateTest, PeerShrinkageCanBeTurnedOff) {
  RouterStateOptions options;
  options.peer_prior.prefill_prior_samples = 0;
  RouterState r(options);
  const WorkerId a = *r.Add(Spec("a"), seconds(0));
  const WorkerId b = *r.Add(Spec("b"), seconds(0));
  const double seed_rate = *ById(r.Snapshot(seconds(0), "m"), a).prefill_tokens_per_s;
  Teach(&r, a, 50, 2 * seed_rate, 0.01);
  Teach(&r, b, 50, seed_rate, 0.01);
  EXPECT_DOUBLE_EQ(*ById(r.Snapshot(seconds(0), "m"), a).prefill_tokens_per_s,
                   r.rates().Estimate(a)->prefill_tokens_per_s);
}

TEST(RouterStateTest, PeerPriorPoolsOnlyTheSameProfile) {
  RouterState r;
  const WorkerId used = *r.Add(Spec("used"), seconds(0));
  WorkerSpec other = Spec("other");
  other.profile = "llama-3.1-8b-h100";
  const WorkerId idle_other = *r.Add(other, seconds(0));
  const double other_seed = *ById(r.Snapshot(seconds(0), "m"), idle_other).prefill_tokens_per_s;
  Teach(&r, used, 50, 50 * other_seed, 0.002);
  EXPECT_DOUBLE_EQ(*ById(r.Snapshot(seconds(0), "m"), idle_other).prefill_tokens_per_s, other_seed);
}

TEST(RouterStateTest, PeerPriorCanBeTurnedOff) {
  RouterStateOptions options;
  options.peer_prior.enabled = false;
  RouterState r(options);
  const WorkerId used = *r.Add(Spec("used"), seconds(0));
  const WorkerId idle = *r.Add(Spec("idle"), seconds(0));
  const double seed_rate = *ById(r.Snapshot(seconds(0), "m"), idle).prefill_tokens_per_s;
  Teach(&r, used, 50, 10 * seed_rate, 0.002);
  EXPECT_DOUBLE_EQ(*ById(r.Snapshot(seconds(0), "m"), idle).prefill_tokens_per_s, seed_rate);
}

TEST(RouterStateTest, CpuTierBandwidthDefaultsToTheEngineModels) {
  RouterState r;
  const WorkerId plain = *r.Add(Spec("plain"), seconds(0));
  WorkerSpec configured = Spec("configured");
  configured.tier_load_bytes_per_s[static_cast<int>(Tier::kCpu)] = 5e9;
  const WorkerId set = *r.Add(configured, seconds(0));
  auto snaps = r.Snapshot(seconds(0), "m");
  const auto& cpu_of = [&](WorkerId id) {
    return ById(snaps, id).tier_load_bytes_per_s[static_cast<int>(Tier::kCpu)];
  };
  ASSERT_TRUE(cpu_of(plain).has_value());
  EXPECT_DOUBLE_EQ(*cpu_of(plain), engine::EngineConfig{}.cpu_to_gpu_bandwidth_bytes_per_s);
  ASSERT_TRUE(cpu_of(set).has_value());
  EXPECT_DOUBLE_EQ(*cpu_of(set), 5e9);
  // Only the CPU tier gets a default: disk and shared tiers stay unloadable.
  EXPECT_FALSE(ById(snaps, plain).tier_load_bytes_per_s[static_cast<int>(Tier::kDisk)]);
}

TEST(RouterStateTest, ProfileSpeedupScalesTheSeedToTheEnginesPace) {
  RouterState r;
  const WorkerId real = *r.Add(Spec("real"), seconds(0));
  WorkerSpec sped = Spec("sped");
  sped.profile_speedup = 10;
  const WorkerId fast = *r.Add(sped, seconds(0));
  auto snaps = r.Snapshot(seconds(0), "m");
  const sched::WorkerSnapshot& a = ById(snaps, real);
  const sched::WorkerSnapshot& b = ById(snaps, fast);
  ASSERT_TRUE(a.prefill_tokens_per_s && b.prefill_tokens_per_s);
  EXPECT_NEAR(*b.prefill_tokens_per_s / *a.prefill_tokens_per_s, 10, 1e-6);
  ASSERT_TRUE(a.decode_step && b.decode_step);
  EXPECT_NEAR(a.decode_step->Seconds(8, 50000) / b.decode_step->Seconds(8, 50000), 10, 1e-9);
  const int cpu = static_cast<int>(Tier::kCpu);
  ASSERT_TRUE(a.tier_load_bytes_per_s[cpu] && b.tier_load_bytes_per_s[cpu]);
  EXPECT_DOUBLE_EQ(*b.tier_load_bytes_per_s[cpu], 10 * *a.tier_load_bytes_per_s[cpu]);
}

TEST(RouterStateTest, NonPositiveProfileSpeedupIsRejected) {
  RouterState r;
  WorkerSpec s = Spec("zero");
  s.profile_speedup = 0;
  auto added = r.Add(s, seconds(0));
  ASSERT_FALSE(added.has_value());
  EXPECT_NE(added.error().find("profile_speedup"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::fleet

namespace kvroute::fleet {
namespace {

// P/D inputs (issue 19): TP and GPUs from the profile unless the spec says, the bytes a pull
// moves per block (MLA latent on every decode rank), the link seeded from the profile's first
// entry or a named one, overrides, and a learned bandwidth after observed pulls.
TEST(RouterStateTest, PdSpecFieldsReachTheSnapshot) {
  RouterState r;
  WorkerSpec d = Spec("d");
  d.profile = "kimi-k2.6-mi355x-tp2";
  d.role = sched::Role::kDecode;
  ASSERT_TRUE(r.Add(d, seconds(0)).has_value());
  WorkerSpec p = Spec("p");
  p.profile = "kimi-k2.6-mi355x-tp4";
  p.role = sched::Role::kPrefill;
  p.gpus = 8;  // a node's GPUs, half idle
  p.link = "roce-100g";
  ASSERT_TRUE(r.Add(p, seconds(0)).has_value());
  const auto snap = r.Snapshot(seconds(0), "");
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].role, sched::Role::kDecode);
  EXPECT_EQ(snap[0].tp, 2u);
  EXPECT_EQ(snap[0].gpus, 2u);
  EXPECT_EQ(snap[1].tp, 4u);
  EXPECT_EQ(snap[1].gpus, 8u);
  auto profile = engine::LoadProfile("kimi-k2.6-mi355x-tp2");
  ASSERT_TRUE(profile.has_value());
  EXPECT_DOUBLE_EQ(*snap[0].kv_link_bytes_per_s, profile->links.front().bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(snap[0].kv_link_latency_s, profile->links.front().latency_s);
  EXPECT_DOUBLE_EQ(*snap[1].kv_link_bytes_per_s, 12.0e9);  // the named link
  EXPECT_EQ(r.Find(1)->spec.link, "roce-100g");
  EXPECT_EQ(r.Find(0)->spec.link, profile->links.front().name);
  // MLA: every decode rank pulls the whole latent, so TP4 moves twice TP2's bytes.
  EXPECT_DOUBLE_EQ(*snap[1].kv_transfer_bytes_per_block, 2 * *snap[0].kv_transfer_bytes_per_block);
  // Pulls at a quarter of the seed's per-lane bandwidth teach the decode worker's link.
  const double lane = *snap[0].kv_link_bytes_per_s / 4;
  for (int i = 0; i < 300; ++i) {
    EXPECT_TRUE(r.OnKvTransfer(0, 1e9, 2, snap[0].kv_link_latency_s + 1e9 / (2 * lane)));
  }
  EXPECT_NEAR(*r.Snapshot(seconds(1), "")[0].kv_link_bytes_per_s, lane, 0.1 * lane);
  EXPECT_FALSE(r.OnKvTransfer(7, 1e9, 2, 1));  // unknown worker
}

TEST(RouterStateTest, PdSpecIsValidated) {
  RouterState r;
  WorkerSpec bad_gpus = Spec("a");
  bad_gpus.tp = 4;
  bad_gpus.gpus = 2;
  EXPECT_FALSE(r.Add(bad_gpus, seconds(0)).has_value());
  WorkerSpec unknown_link = Spec("b");
  unknown_link.link = "carrier-pigeon";
  EXPECT_FALSE(r.Add(unknown_link, seconds(0)).has_value());
  WorkerSpec own_link = Spec("c");
  own_link.link = "carrier-pigeon";
  own_link.link_bytes_per_s = 1e6;
  own_link.link_latency_s = 2;
  own_link.profile_speedup = 10;  // a sped-up sim: 10x the bandwidth, a tenth the latency
  ASSERT_TRUE(r.Add(own_link, seconds(0)).has_value());
  const auto snap = r.Snapshot(seconds(0), "");
  EXPECT_DOUBLE_EQ(*snap[0].kv_link_bytes_per_s, 1e7);
  EXPECT_DOUBLE_EQ(snap[0].kv_link_latency_s, 0.2);
  WorkerSpec zero_bw = Spec("d");
  zero_bw.link_bytes_per_s = 0;
  EXPECT_FALSE(r.Add(zero_bw, seconds(0)).has_value());
}

}  // namespace
}  // namespace kvroute::fleet
