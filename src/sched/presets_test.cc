// Each built-in policy on hand-built snapshots, with the expected costs worked out by hand
// in the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "sched/registry.h"
#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;
using testing::Worker;

std::shared_ptr<const Policy> Preset(std::string_view name) {
  auto p = BuiltinPolicy(name);
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
  return p ? *p : nullptr;
}

Decision Decide(const Policy& p, const RequestProfile& r, const std::vector<WorkerSnapshot>& ws,
                PolicyState& state) {
  auto d = p.Decide(r, ws, state);
  EXPECT_TRUE(d.has_value()) << (d ? "" : d.error().message);
  return d ? *d : Decision{};
}

TEST(RoundRobinPresetTest, CyclesOverHealthyWorkers) {
  auto p = Preset("round_robin");
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2), Worker(3)};
  ws[1].healthy = false;
  PolicyState state(0);
  std::vector<WorkerId> picks;
  for (int i = 0; i < 4; ++i) picks.push_back(*Decide(*p, Request(64), ws, state).chosen);
  EXPECT_EQ(picks, (std::vector<WorkerId>{1, 3, 1, 3}));
}

TEST(RandomPresetTest, SpreadsOverServingWorkersOnly) {
  auto p = Preset("random");
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2), Worker(3)};
  ws[2].models = {"other"};
  PolicyState state(11);
  std::map<WorkerId, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[*Decide(*p, Request(64), ws, state).chosen];
  EXPECT_EQ(seen.count(3), 0u);
  EXPECT_NEAR(seen[1], 1000, 150);
  EXPECT_NEAR(seen[2], 1000, 150);
}

TEST(LeastLoadPresetTest, PicksFewestInflightRequests) {
  auto p = Preset("least_load");
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2), Worker(3)};
  ws[0].inflight_requests = 4;
  ws[1].inflight_requests = 2;
  ws[2].inflight_requests = 1;
  ws[2].draining = true;
  PolicyState state(0);
  EXPECT_EQ(Decide(*p, Request(64), ws, state).chosen, 2u);
}

TEST(ApproxPrefixPresetTest, BlendsPrefixQueueAndKvUsage) {
  auto p = Preset("approx_prefix");
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2), Worker(3)};
  RequestProfile r = Request(320);  // 20 blocks
  r.cache_views = {View(1, 15), View(3, 10)};
  ws[0].inflight_requests = 4;   // normalised (4-0)/4 = 1
  ws[1].inflight_requests = 0;   // 0
  ws[2].inflight_requests = 2;   // 0.5
  ws[0].active_kv_blocks = 500;  // usage 0.5 of 1000
  ws[1].active_kv_blocks = 100;  // 0.1
  ws[2].active_kv_blocks = 200;  // 0.2
  // w1: 3*(1-15/20) + 2*1   + 2*0.5 = 0.75 + 2 + 1 = 3.75
  // w2: 3*1         + 2*0   + 2*0.1 = 3.2
  // w3: 3*(1-10/20) + 2*0.5 + 2*0.2 = 1.5 + 1 + 0.4 = 2.9
  PolicyState state(0);
  const Decision d = Decide(*p, r, ws, state);
  EXPECT_EQ(d.chosen, 3u);
  EXPECT_DOUBLE_EQ(*d.Find(1)->total_cost, 3.75);
  EXPECT_DOUBLE_EQ(*d.Find(2)->total_cost, 3.2);
  EXPECT_DOUBLE_EQ(*d.Find(3)->total_cost, 2.9);
}

// Dynamo's formula on a worked example: prompt 320 tokens = 20 blocks of 16.
TEST(DynamoCostPresetTest, MatchesTheFormulaOnAWorkedExample) {
  auto p = Preset("dynamo_cost");
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2), Worker(3), Worker(4)};
  RequestProfile r = Request(320);
  // w1: pending 160 tokens, 100 active blocks, GPU 10 + CPU 15 deep.
  //     raw = (160+320)/16 = 30; credit = 10*1 + (15-10)*0.75 = 13.75
  //     decode = 100 + (20 - 10) = 110; cost = 30 - 13.75 + 110 = 126.25
  ws[0].pending_prefill_tokens = 160;
  ws[0].active_kv_blocks = 100;
  // w2: idle, 40 active blocks, no cache: 20 + (40 + 20) = 80
  ws[1].active_kv_blocks = 40;
  // w3: 90 active blocks, all 20 on GPU: max(0, 20 - 20) + (90 + 0) = 90
  ws[2].active_kv_blocks = 90;
  // w4: empty, DISK 8 and SHARED 20 deep (shared weight 0):
  //     credit = 8*0.25 + 12*0 = 2; cost = (20 - 2) + (0 + 20) = 38
  r.cache_views = {View(1, 10, 15), View(3, 20), View(4, 0, 0, 8, 20)};
  PolicyState state(0);
  const Decision d = Decide(*p, r, ws, state);
  EXPECT_DOUBLE_EQ(d.Find(1)->costs.at(0), 126.25);
  EXPECT_DOUBLE_EQ(d.Find(2)->costs.at(0), 80.0);
  EXPECT_DOUBLE_EQ(d.Find(3)->costs.at(0), 90.0);
  EXPECT_DOUBLE_EQ(d.Find(4)->costs.at(0), 38.0);
  EXPECT_EQ(d.chosen, 4u);
}

TEST(DynamoCostPresetTest, ActiveRequestWeightAndTemperatureFromYaml) {
  auto p = Registry::Builtin().ParsePolicy(R"(
name: dynamo_warm
scorers: [{name: dynamo_cost, active_request_weight: 2.0}]
picker: {name: softmax, temperature: 0.5}
)");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2)};
  ws[0].inflight_requests = 3;  // cost = 20 + 20 + 2*3 = 46
  ws[1].inflight_requests = 0;  // cost = 20 + 20 = 40
  PolicyState state(0);
  const Decision d = Decide(**p, Request(320), ws, state);
  EXPECT_DOUBLE_EQ(d.Find(1)->costs.at(0), 46.0);
  EXPECT_DOUBLE_EQ(d.Find(2)->costs.at(0), 40.0);
  // Normalised costs 1 and 0; p ∝ exp(-c/0.5): p(w2) = 1 / (1 + e^-2)
  EXPECT_NEAR(*d.Find(2)->probability, 1 / (1 + std::exp(-2.0)), 1e-12);
}

class LlmdStickyTest : public ::testing::Test {
 protected:
  // w1 holds the whole prompt; w2 holds nothing. Rate 1000 tok/s: tau = 14000 tokens.
  void SetUp() override {
    ws_ = {Worker(1), Worker(2)};
    for (auto& w : ws_) w.prefill_tokens_per_s = 1000;
    request_ = Request(320);
    request_.cache_views = {View(1, 20)};
  }
  std::vector<WorkerSnapshot> ws_;
  RequestProfile request_;
  PolicyState state_{0};
};

TEST_F(LlmdStickyTest, KeepsStickyWorkerBelowTauEvenWhenBusier) {
  auto p = Preset("llmd_sticky");
  ws_[0].pending_prefill_tokens = 14000;  // look-ahead 14000 + 320*0 = tau: still sticky
  const Decision d = Decide(*p, request_, ws_, state_);
  EXPECT_EQ(d.chosen, 1u);
  EXPECT_EQ(d.Find(2)->dropped_by, "prefix_affinity");
}

TEST_F(LlmdStickyTest, SpreadsOnceTauIsExceeded) {
  auto p = Preset("llmd_sticky");
  ws_[0].pending_prefill_tokens = 14001;
  const Decision d = Decide(*p, request_, ws_, state_);
  // Nobody is sticky any more: the filter is skipped and token load decides:
  // w1 = 14001 / 4194304, w2 = 320 / 4194304.
  EXPECT_EQ(d.chosen, 2u);
  EXPECT_EQ(d.notes.size(), 1u);
  EXPECT_DOUBLE_EQ(d.Find(2)->costs.at(0), 320.0 / 4194304);
}

TEST_F(LlmdStickyTest, MovesToAnotherStickyWorkerBeforeSpreading) {
  auto p = Preset("llmd_sticky");
  ws_.push_back(Worker(3));
  ws_[2].prefill_tokens_per_s = 1000;
  ws_[2].pending_prefill_tokens = 9000;
  ws_[0].pending_prefill_tokens = 20000;
  request_.cache_views.push_back(View(3, 17));  // 0.85 >= 0.80
  const Decision d = Decide(*p, request_, ws_, state_);
  EXPECT_EQ(d.chosen, 3u);
  EXPECT_EQ(d.Find(1)->dropped_by, "prefix_affinity");
  EXPECT_EQ(d.Find(2)->dropped_by, "prefix_affinity");
}

class PredictedLatencyTest : public ::testing::Test {
 protected:
  // Prompt 3200 tokens = 200 blocks; every worker prefills 10000 tok/s, so a full
  // recompute costs 0.32 s.
  void SetUp() override {
    request_ = Request(3200);
    request_.predicted_output_tokens = 100;
    for (WorkerId id : {1u, 2u, 3u}) {
      WorkerSnapshot w = Worker(id);
      w.prefill_tokens_per_s = 10000;
      w.decode_step =
          StepTimeModel{.base_s = 0.01, .per_sequence_s = 0.001, .per_kv_token_s = 1e-6};
      w.kv_bytes_per_block = 1e6;
      w.tier_load_bytes_per_s[static_cast<int>(Tier::kCpu)] = 1e10;
      ws_.push_back(w);
    }
    policy_ = Preset("predicted_latency");
  }
  Decision Run() { return Decide(*policy_, request_, ws_, state_); }

  RequestProfile request_;
  std::vector<WorkerSnapshot> ws_;
  std::shared_ptr<const Policy> policy_;
  PolicyState state_{0};
};

// w1 holds 170 of 200 blocks (0.85, a shared system prompt's share): above the preset's
// prefix_affinity threshold (0.20), so w1 keeps the request while its predicted TTFT exceeds
// an idle worker's (0.32 s) by no more than the recompute it saves (2,720 tokens, 0.272 s).
TEST_F(PredictedLatencyTest, PrefersCacheHolderWhenItsQueueIsShort) {
  request_.cache_views = {View(1, 170)};
  ws_[0].pending_prefill_tokens = 2000;  // TTFT 0.2 + 480/10000 = 0.248 s < 0.32 s elsewhere
  const Decision d = Run();
  EXPECT_EQ(d.chosen, 1u);
  EXPECT_NEAR(*d.Find(1)->predicted_ttft_s, 0.248, 1e-12);
  EXPECT_EQ(d.Find(2)->dropped_by, "prefix_affinity");
}

TEST_F(PredictedLatencyTest, StaysWhileTheQueueCostsLessThanTheRecomputeItSaves) {
  request_.cache_views = {View(1, 170)};
  ws_[0].pending_prefill_tokens = 4000;  // 0.448 s > 0.32 s elsewhere, but <= 0.32 + 0.272
  EXPECT_EQ(Run().chosen, 1u);
}

TEST_F(PredictedLatencyTest, MovesAwayWhenTheQueueCostsMoreThanTheRecomputeItSaves) {
  request_.cache_views = {View(1, 170)};
  ws_[0].pending_prefill_tokens = 6000;  // 0.648 s > 0.32 + 0.272 s
  const Decision d = Run();
  EXPECT_NE(d.chosen, 1u);
  EXPECT_NEAR(d.Find(1)->costs.at(0), 0.648, 1e-12);
}

TEST_F(PredictedLatencyTest, ItlGuardRejectsWorkerThatWouldBreakTheSlo) {
  request_.cache_views = {View(1, 200)};  // w1 has the best TTFT (0 s) ...
  ws_[0].inflight_requests = 50;          // ... but batch 51 and 9000 blocks:
  ws_[0].active_kv_blocks = 9000;
  // itl(w1) = 0.01 + 0.001*51 + 1e-6*(144000 + 0 + 100) = 0.2051 s > 0.1 s SLO, and beyond
  // the 1.25x the guard allows the conversation's holder (w1 holds the whole prompt)
  // itl(w2) = 0.01 + 0.001*1 + 1e-6*(3200 + 100) = 0.0143 s
  const Decision d = Run();
  EXPECT_EQ(d.Find(1)->dropped_by, "itl_guard");
  EXPECT_NEAR(*d.Find(2)->predicted_itl_s, 0.0143, 1e-12);
  EXPECT_NE(d.chosen, 1u);
}

TEST_F(PredictedLatencyTest, ItlGuardYieldsWhenNoWorkerCanMeetTheSlo) {
  request_.cache_views = {View(1, 200)};
  for (auto& w : ws_) w.inflight_requests = 200;  // every ITL > 0.2 s
  const Decision d = Run();
  EXPECT_EQ(d.chosen, 1u);  // best TTFT among all
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("itl_guard"), std::string::npos);
}

TEST_F(PredictedLatencyTest, CpuTierHitIsCheaperThanRecomputeButDearerThanGpu) {
  request_.cache_views = {View(1, 200), View(2, 0, 200)};
  // w1: GPU hit, 0 s; w2: CPU hit, 200 * 1e6 / 1e10 = 0.02 s; w3: recompute 0.32 s
  const Decision d = Run();
  EXPECT_DOUBLE_EQ(d.Find(1)->costs.at(0), 0.0);
  // w2 holds as much but would load it (0.02 s) while idle w1 has it on GPU (0 s): an idle
  // worker at least as deep and faster ends w2's stickiness.
  EXPECT_EQ(d.Find(2)->dropped_by, "prefix_affinity");
  EXPECT_NE(d.Find(2)->drop_reason.find("0.020s"), std::string::npos) << d.Find(2)->drop_reason;
  // w3 would recompute (0.32 s) but holds nothing while w1 and w2 hold the whole prompt.
  EXPECT_EQ(d.Find(3)->dropped_by, "prefix_affinity");
  EXPECT_EQ(d.chosen, 1u);
  ws_[0].healthy = false;
  EXPECT_EQ(Run().chosen, 2u);
}

TEST_F(PredictedLatencyTest, MissingRateIsAnErrorNotAGuess) {
  ws_[1].prefill_tokens_per_s.reset();
  auto d = policy_->Decide(request_, ws_, state_);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code, SchedError::Code::kMissingInput);
  EXPECT_NE(d.error().message.find("w2"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::sched
