// Lease renewal against the store itself (EngineConfig::SharedTier::lease_renew_every; the
// engine's side of it is src/engine/engine_lease_test.cc): a request queued longer than the
// store's lease TTL, which ends an unrenewed lease by itself (its blocks may then be evicted
// while they are still credited), keeps a renewed one live until it is scheduled.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "store/in_process_store.h"

namespace kvroute::store {
namespace {

using engine::EngineConfig;
using engine::NewEngine;
using engine::enginetest::BlocksConfig;
using engine::enginetest::Drive;
using engine::enginetest::Req;
using engine::enginetest::Seq;
using engine::enginetest::StepOnce;
using engine::enginetest::TestProfile;
using engine::enginetest::Trace;

TEST(StoreLeaseRenewalTest, ARenewedLeaseOutlivesTheStoresLeaseTtl) {
  for (bool renew : {false, true}) {
    StoreOptions so;
    so.capacity_bytes = 1e9;
    so.block_size = 16;
    so.lease_ttl = std::chrono::milliseconds(100);  // a few of the test profile's ~14 ms steps
    auto store = std::make_shared<InProcessSharedStore>(so, 1000);
    EngineConfig c = BlocksConfig(64, 0, 0);
    c.shared.store = store;
    Trace run;  // engine A computes the prompt, so the store holds it; then B, on A's clock
    {
      auto a = NewEngine(TestProfile(), c);
      ASSERT_FALSE(a->Add(Req("warm", Seq(64), 1)));
      Drive(*a, &run);
    }
    const Nanos queued_at = run.now;
    c.max_num_seqs = 1;
    c.shared.lease_renew_every = renew ? std::chrono::milliseconds(30) : Nanos(0);
    auto b = NewEngine(TestProfile(), c);
    ASSERT_FALSE(b->Add(Req("busy", Seq(20, 5000), 40)));  // takes the one seat
    ASSERT_FALSE(b->Add(Req("conv", Seq(64), 1)));         // queues behind it
    while (!run.cached.contains("conv") && b->HasWork()) {
      StepOnce(*b, &run);
      store->core().Expire(run.now, nullptr);
    }
    ASSERT_GT(run.now - queued_at, std::chrono::milliseconds(300));  // 3 lease TTLs
    EXPECT_EQ(run.cached["conv"], 48u);
    EXPECT_EQ(store->core().counters().leases_expired > 0, !renew);
    Drive(*b, &run);
    EXPECT_EQ(store->core().live_leases(), 0u);
  }
}

}  // namespace
}  // namespace kvroute::store
