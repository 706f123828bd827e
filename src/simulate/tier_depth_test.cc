// From engine events to the tier learner (issue 20; here, not in fleet/, because it feeds a
// kv::KvIndex as simulate does and fleet/ may not include kv/): the host blocks right after a worker's
// GPU prefix are credited, priced and learned as host loads, not as loads from the shared
// store that also holds them. Host copies are made on GPU eviction, so the host tier never
// holds the hot prefix the GPU keeps; a tier's depth therefore counts blocks in it or a
// faster one (kv/README.md "Index"). The views are built as kvroute simulate and the gateway
// build them: the index's matches copied, then the store's SHARED depth merged.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "fleet/booking.h"
#include "fleet/router_state.h"
#include "kv/index/index.h"
#include "sched/latency_model.h"
#include "sched/tier_pricing.h"

namespace kvroute::fleet {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kGpu = static_cast<int>(Tier::kGpu);
constexpr int kCpu = static_cast<int>(Tier::kCpu);
constexpr int kDisk = static_cast<int>(Tier::kDisk);
constexpr int kShared = static_cast<int>(Tier::kShared);
constexpr std::uint32_t kBlockSize = 16;

// Block c's 16 tokens are c*16 .. c*16+15.
std::vector<TokenId> Tokens(std::uint32_t from, std::uint32_t to) {
  std::vector<TokenId> t((to - from) * kBlockSize);
  std::iota(t.begin(), t.end(), static_cast<TokenId>(from * kBlockSize));
  return t;
}

// Engine hash of block i (the chain 0, 1, 2, ... of one conversation).
kv::EngineHash Hash(std::uint32_t i) { return 1000 + i; }

kv::BlockStored Stored(std::uint32_t from, std::uint32_t to, const char* medium) {
  kv::BlockStored s;
  for (std::uint32_t i = from; i < to; ++i) s.block_hashes.push_back(Hash(i));
  if (from > 0) s.parent_block_hash = Hash(from - 1);
  s.token_ids = Tokens(from, to);
  s.block_size = kBlockSize;
  s.medium = medium;
  return s;
}

kv::BlockRemoved Removed(std::uint32_t from, std::uint32_t to, const char* medium) {
  kv::BlockRemoved r;
  for (std::uint32_t i = from; i < to; ++i) r.block_hashes.push_back(Hash(i));
  r.medium = medium;
  return r;
}

kv::KvEventBatch Batch(std::vector<kv::KvEvent> events) {
  kv::KvEventBatch b;
  b.events = std::move(events);
  return b;
}

// Worker `w` computed blocks [0, end) on GPU, then its GPU evicted [gpu, end) to the host;
// the store (written through) holds [0, shared).
void Feed(kv::KvIndex* index, WorkerId w, std::uint32_t gpu, std::uint32_t end,
          std::uint32_t shared) {
  index->ApplyBatch(w, Batch({Stored(0, end, "GPU")}));
  index->ApplyBatch(w, Batch({Stored(gpu, end, "CPU"), Removed(gpu, end, "GPU")}));
  index->ApplyBatch(sched::kSharedStoreWorker, Batch({Stored(0, shared, "SHARED")}));
}

WorkerSpec Spec(std::string name) {
  WorkerSpec s;
  s.name = std::move(name);
  s.models = {"m"};
  s.tier_load_bytes_per_s[kCpu] = 25e9;
  s.tier_load_bytes_per_s[kShared] = 12.5e9;
  return s;
}

// The request for `blocks` full blocks of the conversation, with the views the index and the
// store give it (sched::MergeSharedTier over `workers`).
sched::RequestProfile Request(const kv::KvIndex& index, std::uint32_t blocks,
                              std::span<const sched::WorkerSnapshot> workers) {
  sched::RequestProfile p;
  p.model = "m";
  p.block_size = kBlockSize;
  p.prompt_tokens = blocks * kBlockSize + 5;
  p.num_full_blocks = blocks;
  p.predicted_output_tokens = 100;
  kv::BlockKeyer keyer = index.keyer();
  std::vector<kv::BlockKey> keys;
  keyer.AppendKeys(Tokens(0, blocks), keyer.Root(), &keys);
  for (const kv::WorkerMatch& m : index.Lookup(keys)) {
    sched::CacheView v;
    v.worker = m.worker;
    v.depth_blocks = m.depth;
    v.any_depth_blocks = m.any_depth;
    p.cache_views.push_back(v);
  }
  sched::MergeSharedTier(workers, &p.cache_views);
  return p;
}

const sched::CacheView& ViewOf(const sched::RequestProfile& p, WorkerId w) {
  for (const sched::CacheView& v : p.cache_views) {
    if (v.worker == w) return v;
  }
  ADD_FAILURE() << "no view of worker " << w;
  return p.cache_views.front();
}

TEST(RouterStateTierDepthTest, EachBlockIsCreditedToTheFastestTierHoldingItAlongThePrefix) {
  RouterState r;
  const WorkerId w = *r.Add(Spec("a"), seconds(0));
  const WorkerId other = *r.Add(Spec("b"), seconds(0));
  kv::KvIndex index{kv::BlockKeyer{}};
  Feed(&index, w, 10, 20, 30);  // GPU 0..9, host 10..19, store 0..29
  const auto snaps = r.Snapshot(seconds(1), "m");
  const sched::RequestProfile p = Request(index, 40, snaps);
  const sched::LayeredHits hits = sched::LayerHits(ViewOf(p, w), p.num_full_blocks);
  EXPECT_EQ(hits.blocks[kGpu], 10u);
  EXPECT_EQ(hits.blocks[kCpu], 10u);
  EXPECT_EQ(hits.blocks[kDisk], 0u);
  EXPECT_EQ(hits.blocks[kShared], 10u);
  EXPECT_EQ(hits.mixed_blocks, 0u);
  // The other worker has only the store's copy.
  const sched::LayeredHits elsewhere = sched::LayerHits(ViewOf(p, other), p.num_full_blocks);
  EXPECT_EQ(elsewhere.blocks[kShared], 30u);
  EXPECT_EQ(elsewhere.total(), 30u);
  // The same split through the pricing a decision reports: host blocks at the host's speed.
  const sched::LoadPlan plan = sched::PlanLoad(p, ViewOf(p, w), snaps[w]);
  EXPECT_EQ(plan.load_blocks[kCpu], 10u);
  EXPECT_EQ(plan.load_blocks[kShared], 10u);
}

TEST(RouterStateTierDepthTest, AFirstTokenAfterHostBlocksTeachesTheHostTierNotTheStore) {
  RouterState r;
  const WorkerId w = *r.Add(Spec("a"), seconds(0));
  kv::KvIndex index{kv::BlockKeyer{}};
  Feed(&index, w, 10, 400, 400);  // GPU 0..9, host 10..399, the store all of it
  Nanos now = seconds(1);
  const sched::WorkerSnapshot snap = r.Snapshot(now, "m")[w];
  const sched::RequestProfile p = Request(index, 420, std::span(&snap, 1));
  const sched::LoadPlan plan = sched::PlanLoad(p, ViewOf(p, w), snap);
  ASSERT_EQ(plan.load_blocks[kCpu], 390u);
  ASSERT_EQ(plan.load_blocks[kShared], 0u);
  RoutedRequest b = BookingFor(p, CachedPrefixOn(p, w), w, nullptr, 1);
  const double prefill_s = 0.05, wait_s = 0.01;
  b.predicted_wait_s = wait_s;
  b.predicted_ttft_s = prefill_s + wait_s + plan.load_s;
  ASSERT_TRUE(r.Book(1, b, now));
  // The engine loads the host blocks at half the seeded speed.
  now += FromSeconds(prefill_s + wait_s + 2 * plan.load_s);
  r.OnFirstToken(1, now);
  const auto learner = r.TierLoads(w);
  ASSERT_TRUE(learner.has_value());
  EXPECT_EQ(learner->samples(Tier::kCpu), 1u);
  EXPECT_EQ(learner->samples(Tier::kShared), 0u);
  EXPECT_LT(*r.Snapshot(now, "m")[w].tier_load_bytes_per_s[kCpu], 25e9);
  EXPECT_DOUBLE_EQ(*r.Snapshot(now, "m")[w].tier_load_bytes_per_s[kShared], 12.5e9);
  now += milliseconds(500);
  r.OnDone(1, now, true);
}

}  // namespace
}  // namespace kvroute::fleet
