// Shared-store leases from the engine's side (shared_tier.h "Leases"): a request that queues
// leases the store's run of its creditable prefix, and releases it when it is scheduled or
// aborted; a request scheduled in the step it arrived takes none unless added with its
// arrival time (then it leases at Add); `shared.leases = false` takes none at all. The store's side (pinning, lease TTL) is
// src/store/'s tests.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace kvroute::engine {
namespace {

using enginetest::BlocksConfig;
using enginetest::Drive;
using enginetest::Req;
using enginetest::Seq;
using enginetest::StepOnce;
using enginetest::TestProfile;
using enginetest::Trace;

// Holds every block offered to it and records each lease's hashes and whether it ended.
class LeaseRecordingStore : public SharedKvStore {
 public:
  std::size_t Match(std::span<const kv::EngineHash> hashes, Nanos) override {
    std::size_t n = 0;
    while (n < hashes.size() && held.contains(hashes[n])) ++n;
    return n;
  }
  void Put(std::span<const BlockMeta> blocks, Nanos) override {
    for (const BlockMeta& b : blocks) held.insert(b.hash);
  }
  std::uint64_t Lease(std::span<const kv::EngineHash> hashes, Nanos) override {
    ++lease_calls;
    std::vector<kv::EngineHash> run;
    for (kv::EngineHash h : hashes) {
      if (!held.contains(h)) continue;
      run.push_back(h);
    }
    if (run.empty()) return 0;
    live[++next_id] = std::move(run);
    return next_id;
  }
  void Release(std::uint64_t id, Nanos) override {
    EXPECT_EQ(live.erase(id), 1u) << "released twice or never granted: " << id;
    ++released;
  }
  std::set<kv::EngineHash> held;
  std::map<std::uint64_t, std::vector<kv::EngineHash>> live;
  std::uint64_t next_id = 0;
  int lease_calls = 0;
  int released = 0;
};

// Engine A computes `prompt` so the store holds its blocks; returns the shared config.
EngineConfig SharedConfig(const std::shared_ptr<LeaseRecordingStore>& store,
                          const std::vector<TokenId>& prompt) {
  EngineConfig c = BlocksConfig(64, 0, 0);
  c.shared.store = store;
  auto a = NewEngine(TestProfile(), c);
  Trace run;
  EXPECT_FALSE(a->Add(Req("warm", prompt, 1)));
  Drive(*a, &run);
  return c;
}

// An engine B sharing the store, with one running seat, so a second request queues.
std::unique_ptr<Engine> OneSeatEngine(const std::shared_ptr<LeaseRecordingStore>& store,
                                      const std::vector<TokenId>& stored_prompt,
                                      bool leases = true) {
  EngineConfig c = SharedConfig(store, stored_prompt);
  c.max_num_seqs = 1;
  c.shared.leases = leases;
  return NewEngine(TestProfile(), c);
}

// "busy" (its own tokens, `busy_output` long) takes the seat; "conv" queues behind it.
void QueueBehindBusy(Engine& b, const std::vector<TokenId>& conv, std::uint32_t busy_output) {
  EXPECT_FALSE(b.Add(Req("busy", Seq(20, 5000), busy_output)));
  EXPECT_FALSE(b.Add(Req("conv", conv, 1)));
}

TEST(EngineLeaseTest, AQueuedRequestLeasesItsStoreRunUntilItIsScheduled) {
  auto store = std::make_shared<LeaseRecordingStore>();
  auto b = OneSeatEngine(store, Seq(64));
  Trace run;
  QueueBehindBusy(*b, Seq(64), 4);
  StepOnce(*b, &run);
  // "busy" was scheduled at once: no lease. "conv" waits: its 3 creditable blocks (64 tokens,
  // the last recomputed) are leased.
  ASSERT_EQ(store->live.size(), 1u);
  EXPECT_EQ(store->live.begin()->second.size(), 3u);
  EXPECT_EQ(store->lease_calls, 1);
  while (!run.cached.contains("conv") && b->HasWork()) {
    EXPECT_EQ(store->live.size(), 1u) << "released before conv was scheduled";
    StepOnce(*b, &run);
  }
  EXPECT_EQ(run.cached["conv"], 48u);
  EXPECT_TRUE(store->live.empty());
  EXPECT_EQ(store->released, 1);
  Drive(*b, &run);
  EXPECT_EQ(store->lease_calls, 1);
}

TEST(EngineLeaseTest, AnAbortedQueuedRequestReleasesItsLease) {
  auto store = std::make_shared<LeaseRecordingStore>();
  auto b = OneSeatEngine(store, Seq(64));
  Trace run;
  QueueBehindBusy(*b, Seq(64), 50);
  StepOnce(*b, &run);
  ASSERT_EQ(store->live.size(), 1u);
  b->Abort("conv");
  EXPECT_TRUE(store->live.empty());
  Drive(*b, &run);
  EXPECT_EQ(store->released, 1);
}

TEST(EngineLeaseTest, TheWholeCreditablePrefixIsLeasedEvenWhatTheGpuHolds) {
  auto store = std::make_shared<LeaseRecordingStore>();
  auto b = OneSeatEngine(store, Seq(80));
  Trace run;
  ASSERT_FALSE(b->Add(Req("first", Seq(32), 1)));  // B's GPU now holds blocks 0 and 1
  Drive(*b, &run);
  QueueBehindBusy(*b, Seq(80), 4);
  StepOnce(*b, &run);
  ASSERT_EQ(store->live.size(), 1u);
  // 80 tokens: 4 creditable blocks. 0 and 1 are on B's GPU but may be evicted while conv
  // waits; the hit would then continue from the store at block 0, so all 4 are leased.
  EXPECT_EQ(store->live.begin()->second.size(), 4u);
  Drive(*b, &run);
  EXPECT_EQ(run.cached["conv"], 64u);
  EXPECT_TRUE(store->live.empty());
}

TEST(EngineLeaseTest, ARequestAddedWithItsArrivalTimeLeasesAtAdd) {
  auto store = std::make_shared<LeaseRecordingStore>();
  EngineConfig c = SharedConfig(store, Seq(64));
  auto b = NewEngine(TestProfile(), c);
  Trace run;
  RequestSpec spec = Req("conv", Seq(64), 1);
  spec.arrived_at = Nanos(0);
  ASSERT_FALSE(b->Add(std::move(spec)));
  EXPECT_EQ(store->live.size(), 1u);  // before any step
  Drive(*b, &run);
  EXPECT_TRUE(store->live.empty());
  EXPECT_EQ(store->lease_calls, 1);
}

// A request queued longer than shared.lease_renew_every renews its lease (a new one, then
// the old released) at every step past that age, so it always holds exactly one, on the same
// blocks, until it is scheduled; 0 renews never.
TEST(EngineLeaseTest, AQueuedRequestRenewsItsLeaseWhileItWaits) {
  for (Nanos every : {Nanos(0), Nanos(std::chrono::microseconds(1))}) {
    auto store = std::make_shared<LeaseRecordingStore>();
    EngineConfig c = SharedConfig(store, Seq(64));
    c.max_num_seqs = 1;
    c.shared.lease_renew_every = every;
    auto b = NewEngine(TestProfile(), c);
    Trace run;
    QueueBehindBusy(*b, Seq(64), 20);  // conv waits 20 decode steps for the seat
    StepOnce(*b, &run);
    ASSERT_EQ(store->live.size(), 1u);
    const std::vector<kv::EngineHash> leased = store->live.begin()->second;
    while (!run.cached.contains("conv") && b->HasWork()) {
      ASSERT_EQ(store->live.size(), 1u) << "conv waited without a lease";
      EXPECT_EQ(store->live.begin()->second, leased);
      StepOnce(*b, &run);
    }
    Drive(*b, &run);
    EXPECT_EQ(run.cached["conv"], 48u);
    EXPECT_TRUE(store->live.empty());
    EXPECT_EQ(store->released, store->lease_calls);
    if (every == Nanos(0)) {
      EXPECT_EQ(store->lease_calls, 1);
    } else {
      EXPECT_GE(store->lease_calls, 10);  // about one per step conv waited
    }
  }
}

TEST(EngineLeaseTest, LeasesOffTakesNone) {
  auto store = std::make_shared<LeaseRecordingStore>();
  auto b = OneSeatEngine(store, Seq(64), /*leases=*/false);
  Trace run;
  QueueBehindBusy(*b, Seq(64), 4);
  Drive(*b, &run);
  EXPECT_EQ(store->lease_calls, 0);
  EXPECT_EQ(run.cached["conv"], 48u);
}

}  // namespace
}  // namespace kvroute::engine
