// RouterState and the tier learner (issue 20): bookings with lower-tier hits teach the
// worker's tier bandwidths at their first tokens, the snapshot carries what was learned, and
// nothing the scheduler computes from learned tiers is ever non-finite.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "fleet/booking.h"
#include "fleet/router_state.h"
#include "sched/latency_model.h"
#include "sched/policy.h"
#include "sched/registry.h"

namespace kvroute::fleet {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kDisk = static_cast<int>(Tier::kDisk);
constexpr int kShared = static_cast<int>(Tier::kShared);
constexpr double kDiskSeed = 6.5e9;

WorkerSpec TieredSpec(std::string name) {
  WorkerSpec s;
  s.name = std::move(name);
  s.models = {"m"};
  s.tier_load_bytes_per_s[kDisk] = kDiskSeed;
  s.tier_load_bytes_per_s[kShared] = 12.5e9;
  return s;
}

// A request of `prompt_blocks` full blocks whose first `gpu` are in GPU memory and the rest
// up to `disk` on the worker's disk.
sched::RequestProfile Request(WorkerId w, std::uint32_t prompt_blocks, std::uint32_t gpu,
                              std::uint32_t disk) {
  sched::RequestProfile p;
  p.model = "m";
  p.block_size = 16;
  p.prompt_tokens = prompt_blocks * 16 + 5;
  p.num_full_blocks = prompt_blocks;
  p.predicted_output_tokens = 100;
  sched::CacheView v;
  v.worker = w;
  v.depth_blocks[static_cast<int>(Tier::kGpu)] = gpu;
  v.depth_blocks[kDisk] = disk;
  v.any_depth_blocks = disk;
  p.cache_views.push_back(v);
  return p;
}

// One request at a time on an idle worker whose disk really loads at `true_bw`: the
// prediction (prefill + wait + load at the snapshot's bandwidth) is made as a policy would,
// and the first token comes when the engine would give it (prefill + wait + the true load).
void ServeDiskHits(RouterState* r, WorkerId w, double true_bw, int n, Nanos* now) {
  const double prefill_s = 0.25, wait_s = 0.01;
  for (int i = 0; i < n; ++i) {
    const std::uint32_t disk = 100 + static_cast<std::uint32_t>((i * 37) % 500);
    const sched::RequestProfile p = Request(w, disk + 20, 10, disk);
    const sched::WorkerSnapshot snap = r->Snapshot(*now, "m")[w];
    const sched::LoadPlan plan = sched::PlanLoad(p, p.cache_views[0], snap);
    ASSERT_GT(plan.load_blocks[kDisk], 0u);
    RoutedRequest b = BookingFor(p, CachedPrefixOn(p, w), w, nullptr, 1);
    b.predicted_wait_s = wait_s;
    b.predicted_ttft_s = prefill_s + wait_s + plan.load_s;
    const RequestId id = 1000 + i;
    ASSERT_TRUE(r->Book(id, b, *now));
    const double true_load = plan.load_blocks[kDisk] * *snap.kv_bytes_per_block / true_bw;
    *now += FromSeconds(prefill_s + wait_s + true_load);
    r->OnFirstToken(id, *now);
    *now += milliseconds(500);
    r->OnDone(id, *now, true);
  }
}

TEST(RouterStateTiersTest, ASnapshotCarriesTheDiskBandwidthLearnedFromFirstTokens) {
  for (double factor : {1.0 / 4, 4.0}) {  // the disk is 4x slower, then 4x faster, than seeded
    RouterState r;
    const WorkerId w = *r.Add(TieredSpec("a"), seconds(0));
    const WorkerId idle = *r.Add(TieredSpec("b"), seconds(0));
    Nanos now = seconds(1);
    ServeDiskHits(&r, w, kDiskSeed * factor, 200, &now);
    const auto learner = r.TierLoads(w);
    ASSERT_TRUE(learner.has_value());
    EXPECT_GT(learner->samples(Tier::kDisk), 150u) << factor;
    const double truth = kDiskSeed * factor;
    const auto snaps = r.Snapshot(now, "m");
    ASSERT_TRUE(snaps[w].tier_load_bytes_per_s[kDisk].has_value());
    EXPECT_NEAR(*snaps[w].tier_load_bytes_per_s[kDisk], truth, 0.1 * truth) << factor;
    EXPECT_DOUBLE_EQ(*snaps[w].tier_load_bytes_per_s[kDisk], *learner->bytes_per_s(Tier::kDisk));
    // The shared tier loaded nothing, the idle worker served nothing: both keep their seeds.
    EXPECT_DOUBLE_EQ(*snaps[w].tier_load_bytes_per_s[kShared], 12.5e9);
    EXPECT_DOUBLE_EQ(*snaps[idle].tier_load_bytes_per_s[kDisk], kDiskSeed);
    // Refresh carries the same values.
    SnapshotCache cache;
    r.Refresh(now, &cache);
    EXPECT_DOUBLE_EQ(*cache.workers()[w].tier_load_bytes_per_s[kDisk],
                     *snaps[w].tier_load_bytes_per_s[kDisk]);
  }
}

TEST(RouterStateTiersTest, WithLearningOffTheSnapshotKeepsTheSpecsBandwidth) {
  RouterStateOptions o;
  o.learn_tier_bandwidths = false;
  RouterState r(o);
  const WorkerId w = *r.Add(TieredSpec("a"), seconds(0));
  Nanos now = seconds(1);
  ServeDiskHits(&r, w, kDiskSeed / 4, 50, &now);
  EXPECT_DOUBLE_EQ(*r.Snapshot(now, "m")[w].tier_load_bytes_per_s[kDisk], kDiskSeed);
  EXPECT_EQ(r.TierLoads(w)->samples(Tier::kDisk), 0u);
}

TEST(RouterStateTiersTest, RequestsWithoutLowerTierHitsOrPredictionsTeachNothing) {
  RouterState r;
  const WorkerId w = *r.Add(TieredSpec("a"), seconds(0));
  Nanos now = seconds(1);
  // A GPU-only hit, with a prediction.
  sched::RequestProfile gpu_only = Request(w, 50, 40, 0);
  RoutedRequest b = BookingFor(gpu_only, CachedPrefixOn(gpu_only, w), w, nullptr, 1);
  b.predicted_ttft_s = 0.1;
  b.predicted_wait_s = 0;
  ASSERT_TRUE(r.Book(1, b, now));
  r.OnFirstToken(1, now + seconds(3));
  // A disk hit without a prediction (a policy that does not read rates).
  sched::RequestProfile disk = Request(w, 300, 0, 280);
  ASSERT_TRUE(r.Book(2, BookingFor(disk, CachedPrefixOn(disk, w), w, nullptr, 1), now));
  r.OnFirstToken(2, now + seconds(3));
  EXPECT_EQ(r.TierLoads(w)->samples(Tier::kDisk), 0u);
  EXPECT_DOUBLE_EQ(*r.Snapshot(now, "m")[w].tier_load_bytes_per_s[kDisk], kDiskSeed);
}

// The bytes a booked request loads are its worker's tier-path backlog until its first token
// (sched::TtftTerms::tier_queue), whether or not a prediction came with it and whether or not
// the router learns bandwidths; a GPU hit adds nothing.
TEST(RouterStateTiersTest, ABookedLowerTierLoadIsTheWorkersPathBacklogUntilItsFirstToken) {
  for (bool learn : {true, false}) {
    RouterStateOptions o;
    o.learn_tier_bandwidths = learn;
    RouterState r(o);
    const WorkerId w = *r.Add(TieredSpec("a"), seconds(0));
    const Nanos now = seconds(1);
    const double block_bytes = *r.Snapshot(now, "m")[w].kv_bytes_per_block;
    sched::RequestProfile disk = Request(w, 300, 20, 280);  // 260 blocks from disk
    ASSERT_TRUE(r.Book(1, BookingFor(disk, CachedPrefixOn(disk, w), w, nullptr, 1), now));
    sched::RequestProfile gpu_only = Request(w, 50, 40, 0);
    ASSERT_TRUE(r.Book(2, BookingFor(gpu_only, CachedPrefixOn(gpu_only, w), w, nullptr, 1), now));
    auto snap = r.Snapshot(now, "m")[w];
    EXPECT_DOUBLE_EQ(snap.pending_tier_load_bytes[kDisk], 260 * block_bytes) << learn;
    EXPECT_EQ(snap.pending_tier_load_bytes[kShared], 0);
    r.OnFirstToken(1, now + seconds(1));
    EXPECT_EQ(r.Snapshot(now + seconds(1), "m")[w].pending_tier_load_bytes[kDisk], 0) << learn;
    // One cancelled before its first token leaves the backlog too.
    ASSERT_TRUE(r.Book(3, BookingFor(disk, CachedPrefixOn(disk, w), w, nullptr, 1), now));
    r.Cancel(3, now + seconds(2));
    EXPECT_EQ(r.Snapshot(now + seconds(2), "m")[w].pending_tier_load_bytes[kDisk], 0) << learn;
  }
}

TEST(RouterStateTiersTest, AFirstTokenThatWaitedBehindAnotherRequestsLoadTeachesNothing) {
  // With async loads a request whose load is still on the tier's path has not prefilled yet,
  // however long ago it was routed. The next request queues behind that load; its late first
  // token says nothing about the tier, even once the learned prefill rate counts the first
  // request's prefill as done (the decayed queue the prefill learner uses reads 0 then).
  RouterState r;
  const WorkerId w = *r.Add(TieredSpec("a"), seconds(0));
  Nanos now = seconds(1);
  const sched::RequestProfile first = Request(w, 520, 10, 500);
  ASSERT_TRUE(r.Book(1, BookingFor(first, CachedPrefixOn(first, w), w, nullptr, 1), now));
  now += seconds(2);  // long enough for the decayed queue ahead to read 0
  ASSERT_EQ(r.load().PendingPrefillTokens(w, now), 0u);
  const sched::RequestProfile second = Request(w, 420, 10, 400);
  const sched::WorkerSnapshot snap = r.Snapshot(now, "m")[w];
  const sched::LoadPlan plan = sched::PlanLoad(second, second.cache_views[0], snap);
  RoutedRequest b = BookingFor(second, CachedPrefixOn(second, w), w, nullptr, 1);
  b.predicted_wait_s = 0.01;
  b.predicted_ttft_s = 0.25 + 0.01 + plan.load_s;
  ASSERT_TRUE(r.Book(2, b, now));
  r.OnFirstToken(1, now + milliseconds(300));
  r.OnFirstToken(2, now + seconds(2));  // behind request 1's load: reads as a slow disk
  EXPECT_EQ(r.TierLoads(w)->samples(Tier::kDisk), 0u);
  EXPECT_DOUBLE_EQ(*r.Snapshot(now, "m")[w].tier_load_bytes_per_s[kDisk], kDiskSeed);
}

TEST(RouterStateTiersTest, EngineReportedLoadsTeachTheTierAndOutrankFirstTokens) {
  RouterState r;
  const WorkerId w = *r.Add(TieredSpec("a"), seconds(0));
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(r.OnTierLoad(w, Tier::kDisk, 4e9, 1.0));  // 4 GB/s
  EXPECT_NEAR(*r.Snapshot(seconds(1), "m")[w].tier_load_bytes_per_s[kDisk], 4e9, 0.02 * 4e9);
  Nanos now = seconds(1);
  ServeDiskHits(&r, w, 1e9, 30, &now);  // first tokens saying 1 GB/s are ignored
  EXPECT_NEAR(*r.Snapshot(now, "m")[w].tier_load_bytes_per_s[kDisk], 4e9, 0.02 * 4e9);
  EXPECT_FALSE(r.OnTierLoad(w + 7, Tier::kDisk, 4e9, 1.0));  // unknown worker
  EXPECT_FALSE(r.OnTierLoad(w, Tier::kDisk, 0, 1.0));        // unusable sample
  EXPECT_FALSE(r.OnTierLoad(w, Tier::kGpu, 1e9, 1.0));       // GPU loads nothing
}

TEST(RouterStateTiersTest, ScrapedOffloadCountersTeachTheirTierPerScrapeWindow) {
  RouterState r;
  WorkerSpec spec = TieredSpec("a");
  spec.profile_speedup = 2;  // a sped-up sim reports model seconds
  const WorkerId w = *r.Add(spec, seconds(0));
  EngineMetrics m;
  for (int k = 0; k <= 300; ++k) {
    m.scraped_at = seconds(k);
    // 3 GB of disk loads per window, taking 2 model seconds = 1 s of wall time: 3 GB/s.
    m.tier_load_bytes_sum[kDisk] = 3e9 * k;
    m.tier_load_seconds_sum[kDisk] = 2.0 * k;
    r.SetMetrics(w, m);
  }
  auto learner = r.TierLoads(w);
  EXPECT_EQ(learner->transfer_samples(Tier::kDisk), 300u);
  EXPECT_NEAR(*learner->bytes_per_s(Tier::kDisk), 3e9, 0.01 * 3e9);
  // A restart (the counters start again) teaches nothing; then windows resume.
  m.tier_load_bytes_sum[kDisk] = 1e9;
  m.tier_load_seconds_sum[kDisk] = 0.5;
  r.SetMetrics(w, m);
  EXPECT_EQ(r.TierLoads(w)->transfer_samples(Tier::kDisk), 300u);
  // A scrape without the counters, then one with them: no window, nothing learned.
  r.SetMetrics(w, EngineMetrics{});
  r.SetMetrics(w, m);
  EXPECT_EQ(r.TierLoads(w)->transfer_samples(Tier::kDisk), 300u);
}

// Property: whatever the tier learner was fed, no cost or prediction of any built-in policy
// over snapshots carrying its values is non-finite, and every tier bandwidth is finite and
// positive.
TEST(RouterStateTiersTest, NoPredictedCostIsNonFiniteWithLearnedTiers) {
  RouterState r;
  for (int i = 0; i < 4; ++i) r.Add(TieredSpec("w" + std::to_string(i)), seconds(0));
  // Worker 0 fed absurdly fast loads, 1 absurdly slow ones, 2 alternating, 3 garbage.
  const double extremes[][2] = {{1e15, 1e-12}, {1, 1e9}, {1e15, 1e-12}, {1, 1e9}};
  for (int k = 0; k < 500; ++k) {
    r.OnTierLoad(0, Tier::kDisk, extremes[0][0], extremes[0][1]);
    r.OnTierLoad(1, Tier::kDisk, extremes[1][0], extremes[1][1]);
    r.OnTierLoad(2, Tier::kShared, extremes[k % 2][0], extremes[k % 2][1]);
    r.OnTierLoad(3, Tier::kDisk, std::nan(""), -1);
    r.OnTierLoad(3, Tier::kShared, 1e308, 1e-308);
  }
  const auto snaps = r.Snapshot(seconds(1), "m");
  for (const auto& s : snaps) {
    for (int t = 1; t < kNumTiers; ++t) {
      if (!s.tier_load_bytes_per_s[t]) continue;
      EXPECT_TRUE(std::isfinite(*s.tier_load_bytes_per_s[t]) && *s.tier_load_bytes_per_s[t] > 0);
    }
  }
  std::uint64_t lcg = 7;
  auto next = [&](std::uint32_t mod) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::uint32_t>((lcg >> 33) % mod);
  };
  for (std::string_view name : sched::BuiltinPolicyNames()) {
    auto policy = sched::BuiltinPolicy(name);
    ASSERT_TRUE(policy.has_value()) << name;
    sched::PolicyState state(1);
    for (int k = 0; k < 200; ++k) {
      sched::RequestProfile p;
      p.model = "m";
      p.block_size = 16;
      p.num_full_blocks = 1 + next(8000);
      p.prompt_tokens = p.num_full_blocks * 16 + next(16);
      p.predicted_output_tokens = next(2000);
      for (WorkerId w = 0; w < 4; ++w) {
        sched::CacheView v;
        v.worker = w;
        for (int t = 0; t < kNumTiers; ++t) v.depth_blocks[t] = next(p.num_full_blocks + 1);
        v.any_depth_blocks = next(p.num_full_blocks + 1);
        p.cache_views.push_back(v);
        auto ttft = sched::PredictTtft(p, v, snaps[w], sched::kFullTtftModel);
        ASSERT_TRUE(ttft.has_value()) << ttft.error();
        ASSERT_TRUE(std::isfinite(ttft->total_s()));
        ASSERT_TRUE(std::isfinite(ttft->load_s) && ttft->load_s >= 0);
      }
      auto d = (*policy)->Decide(p, snaps, state);
      ASSERT_TRUE(d.has_value()) << name << ": " << d.error().message;
      for (const auto& c : d->candidates) {
        for (double cost : c.costs) ASSERT_TRUE(std::isfinite(cost)) << name;
        ASSERT_TRUE(std::isfinite(c.total_cost.value_or(0))) << name;
        ASSERT_TRUE(std::isfinite(c.predicted_ttft_s.value_or(0))) << name;
      }
    }
  }
}

}  // namespace
}  // namespace kvroute::fleet
