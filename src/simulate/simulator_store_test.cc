// The shared store in virtual time: the measurement of shared-store credit that was gone
// (issue 20's "nothing credited that is gone"). Two workers with a GPU too small to keep the
// sessions, so later turns are credited from the store; with the store's events applied at
// once the credit is never stale, with them delayed and a store that evicts it can be.
#include <gtest/gtest.h>

#include "simulate/sim_test_util.h"

namespace kvroute::simulate {
namespace {

using testing::Options;
using testing::SmallAgentic;

SimResult RunWithStore(double capacity_bytes, Nanos event_delay) {
  SimOptions o = Options(2, "predicted_latency");
  // A GPU that holds about one session's context; no predict-on-route overlay, so that the
  // router's GPU depth is what the engines' events say.
  for (WorkerSpec& w : o.fleet.workers) w.config.num_gpu_blocks_override = 110;
  o.predicted_overlay = false;
  o.shared_store = store::StoreOptions{.capacity_bytes = capacity_bytes, .block_size = 16};
  o.event_delay = event_delay;
  auto r = Simulator(std::move(o), NewAgenticWorkload(SmallAgentic(8, 6))).Run();
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error());
  return r ? std::move(*r) : SimResult{};
}

TEST(SimulatorStoreTest, FreshStoreCreditIsAlwaysFound) {
  const SimResult r = RunWithStore(1e12, Nanos(0));
  EXPECT_GT(r.shared_credited_blocks, 0u);
  EXPECT_EQ(r.shared_missing_blocks, 0u);
}

TEST(SimulatorStoreTest, StaleCreditForBlocksTheStoreEvictedIsCountedMissing) {
  // Room for about one session's blocks, and removals reaching the router 30 s late.
  const SimResult r = RunWithStore(6e8, std::chrono::seconds(30));
  EXPECT_GT(r.store_evicted, 0u);
  EXPECT_GT(r.shared_credited_blocks, 0u);
  EXPECT_GT(r.shared_missing_blocks, 0u);
  EXPECT_LE(r.shared_missing_blocks, r.shared_credited_blocks);
  // The same late events with a store that keeps everything: what is missing above came
  // from the store's evictions, not from the workers' own.
  const SimResult roomy = RunWithStore(1e12, std::chrono::seconds(30));
  EXPECT_LT(roomy.shared_missing_blocks, r.shared_missing_blocks);
}

}  // namespace
}  // namespace kvroute::simulate
