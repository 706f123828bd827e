// Sequences of decisions where the test plays the caller's part (router-side load accounting
// between decisions), to pin the anti-hot-spotting behaviour of the default policy
// (router-anchors.md §5.5: max-score pickers hot-spot identical prompts; cache-aware routers
// keep picking one replica on misses at low concurrency).
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "sched/latency_model.h"
#include "sched/registry.h"
#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;
using testing::Worker;

class SequenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (WorkerId id : {1u, 2u, 3u}) {
      WorkerSnapshot w = Worker(id);
      w.prefill_tokens_per_s = 10000;
      w.decode_step =
          StepTimeModel{.base_s = 0.01, .per_sequence_s = 0.001, .per_kv_token_s = 1e-6};
      workers_.push_back(w);
    }
    policy_ = BuiltinPolicy("predicted_latency").value();
  }

  // Routes `request` and books it the way the gateway does: one more in-flight request and
  // its uncached prompt tokens pending on the chosen worker (no request finishes here).
  WorkerId RouteAndBook(const RequestProfile& request) {
    auto d = policy_->Decide(request, workers_, state_);
    EXPECT_TRUE(d.has_value() && d->chosen.has_value());
    WorkerSnapshot& w = workers_.at(*d->chosen - 1);
    CacheView view{.worker = w.id};
    for (const CacheView& v : request.cache_views) {
      if (v.worker == w.id) view = v;
    }
    w.inflight_requests += 1;
    w.pending_prefill_tokens += PlanLoad(request, view, w).uncached_tokens;
    return w.id;
  }

  std::vector<WorkerSnapshot> workers_;
  std::shared_ptr<const Policy> policy_;
  PolicyState state_{2024};
};

TEST_F(SequenceTest, ColdRequestsSpreadThroughRouterSidePendingLoad) {
  // No cache anywhere: each routed request queues 3200 tokens on its worker, so the next
  // one's predicted TTFT is lower elsewhere; ties at equal load are broken at random.
  std::map<WorkerId, int> count;
  for (int i = 0; i < 30; ++i) ++count[RouteAndBook(Request(3200))];
  EXPECT_EQ(count[1], 10);
  EXPECT_EQ(count[2], 10);
  EXPECT_EQ(count[3], 10);
}

TEST_F(SequenceTest, FullHitsStayOnTheHolderUntilTheItlGuardDivertsThem) {
  RequestProfile r = Request(3200);
  r.predicted_output_tokens = 100;
  r.cache_views = {View(1, 200)};  // w1 holds the whole prompt: TTFT 0 there forever
  // A full hit adds no pending prefill, so only the ITL guard stops the pile-up. w1 holds
  // the conversation (hit 1.0), so the guard keeps it up to 1.25x the 0.1 s SLO:
  // itl(w1) = 0.01 + 0.001*(k+1) + 1e-6*(0 + 100) > 0.125  <=>  k >= 114 requests already there.
  std::map<WorkerId, int> count;
  for (int i = 0; i < 160; ++i) ++count[RouteAndBook(r)];
  EXPECT_EQ(count[1], 114);
  EXPECT_EQ(count[2] + count[3], 46);
}

}  // namespace
}  // namespace kvroute::sched
