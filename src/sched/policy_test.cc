// The host's enforcement of the plug-in contracts (plugin.h) and its fail-open rules.
#include "sched/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sched/filters.h"
#include "sched/pickers.h"
#include "sched/scorers.h"
#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;
using testing::Worker;

// A scorer returning fixed costs (one per candidate, or a wrong count on purpose).
class FixedScorer final : public Scorer {
 public:
  explicit FixedScorer(std::vector<double> costs) : costs_(std::move(costs)) {}
  std::string_view Name() const override { return "fixed"; }
  Inputs Needs() const override { return kScrapedMetrics; }
  std::expected<std::vector<double>, SchedError> Score(const RequestProfile&,
                                                       std::span<const Candidate>) const override {
    return costs_;
  }

 private:
  std::vector<double> costs_;
};

class BadPicker final : public Picker {
 public:
  std::string_view Name() const override { return "bad"; }
  std::expected<PickResult, SchedError> Pick(std::span<const PickRow> rows,
                                             PolicyState&) const override {
    return PickResult{rows.size(), {}};
  }
};

class DropAllButLeavesCountWrong final : public Filter {
 public:
  std::string_view Name() const override { return "short"; }
  Inputs Needs() const override { return kNoInputs; }
  std::expected<std::vector<FilterVerdict>, SchedError> Apply(
      const RequestProfile&, std::span<const Candidate>) const override {
    return std::vector<FilterVerdict>{};
  }
};

Policy Make(std::vector<FilterStep> filters, std::vector<ScorerStep> scorers,
            std::shared_ptr<const Picker> picker = NewArgminPicker()) {
  return Policy("test", std::move(filters), std::move(scorers), std::move(picker));
}

TEST(PolicyTest, NanCostIsAnErrorNamingTheScorer) {
  const Policy p = Make({}, {{std::make_shared<FixedScorer>(std::vector<double>{1.0, NAN}), 1.0}});
  const std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2)};
  PolicyState state(1);
  auto d = p.Decide(Request(64), ws, state);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code, SchedError::Code::kInvalidCost);
  EXPECT_NE(d.error().message.find("scorer 'fixed'"), std::string::npos);
  EXPECT_NE(d.error().message.find("worker 2"), std::string::npos);
}

TEST(PolicyTest, InfiniteCostIsAnError) {
  const double inf = std::numeric_limits<double>::infinity();
  const Policy p = Make({}, {{std::make_shared<FixedScorer>(std::vector<double>{inf}), 1.0}});
  const std::vector<WorkerSnapshot> ws = {Worker(1)};
  PolicyState state(1);
  EXPECT_FALSE(p.Decide(Request(64), ws, state).has_value());
}

TEST(PolicyTest, WrongNumberOfCostsIsAnError) {
  const Policy p = Make({}, {{std::make_shared<FixedScorer>(std::vector<double>{1.0}), 1.0}});
  const std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2)};
  PolicyState state(1);
  auto d = p.Decide(Request(64), ws, state);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().message.find("returned 1 costs for 2"), std::string::npos);
}

TEST(PolicyTest, WrongNumberOfVerdictsIsAnErrorNamingTheFilter) {
  const Policy p = Make({{std::make_shared<DropAllButLeavesCountWrong>()}}, {}, NewRandomPicker());
  const std::vector<WorkerSnapshot> ws = {Worker(1)};
  PolicyState state(1);
  auto d = p.Decide(Request(64), ws, state);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code, SchedError::Code::kContract);
  EXPECT_NE(d.error().message.find("filter 'short'"), std::string::npos);
}

TEST(PolicyTest, OutOfRangePickIsAnErrorNamingThePicker) {
  const Policy p = Make({}, {}, std::make_shared<BadPicker>());
  const std::vector<WorkerSnapshot> ws = {Worker(1)};
  PolicyState state(1);
  auto d = p.Decide(Request(64), ws, state);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().message.find("picker 'bad'"), std::string::npos);
}

TEST(PolicyTest, HardFilterDroppingEveryoneGivesNoWorkerAndSaysWhy) {
  const Policy p = Make({{NewHealthyFilter(), IfAllDropped::kFail}}, {}, NewRandomPicker());
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2)};
  ws[0].healthy = ws[1].healthy = false;
  PolicyState state(1);
  auto d = p.Decide(Request(64), ws, state);
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->chosen.has_value());
  EXPECT_NE(d->why_none.find("healthy"), std::string::npos);
  EXPECT_EQ(d->candidates.at(0).dropped_by, "healthy");
  EXPECT_EQ(d->candidates.at(0).drop_reason, "unhealthy");
}

TEST(PolicyTest, SoftFilterDroppingEveryoneIsSkippedWithANote) {
  const Policy p = Make({{NewNotDrainingFilter(), IfAllDropped::kKeepAll}},
                        {{NewInflightRequestsScorer(), 1.0}});
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2)};
  ws[0].draining = ws[1].draining = true;
  ws[0].inflight_requests = 5;
  PolicyState state(1);
  auto d = p.Decide(Request(64), ws, state);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->chosen, 2u);
  ASSERT_EQ(d->notes.size(), 1u);
  EXPECT_NE(d->notes[0].find("not_draining"), std::string::npos);
  EXPECT_FALSE(d->candidates[0].dropped_by.has_value());
}

TEST(PolicyTest, FiltersSeeOnlySurvivorsOfEarlierFilters) {
  // Worker 1 is unhealthy, worker 2 draining: the second filter must not resurrect 1 nor be
  // "all dropped" by counting it.
  const Policy p = Make({{NewHealthyFilter()}, {NewNotDrainingFilter(), IfAllDropped::kKeepAll}},
                        {{NewInflightRequestsScorer(), 1.0}});
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2), Worker(3)};
  ws[0].healthy = false;
  ws[1].draining = true;
  ws[2].inflight_requests = 50;
  PolicyState state(1);
  auto d = p.Decide(Request(64), ws, state);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->chosen, 3u);
  EXPECT_EQ(d->candidates[0].dropped_by, "healthy");
  EXPECT_EQ(d->candidates[1].dropped_by, "not_draining");
}

TEST(PolicyTest, EmptySnapshotGivesNoWorker) {
  const Policy p = Make({}, {}, NewRandomPicker());
  PolicyState state(1);
  auto d = p.Decide(Request(64), {}, state);
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->chosen.has_value());
  EXPECT_FALSE(d->why_none.empty());
}

TEST(PolicyTest, ZeroBlockSizeIsAnInvalidRequest) {
  const Policy p = Make({}, {}, NewRandomPicker());
  RequestProfile r = Request(64);
  r.block_size = 0;
  const std::vector<WorkerSnapshot> ws = {Worker(1)};
  PolicyState state(1);
  auto d = p.Decide(r, ws, state);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code, SchedError::Code::kInvalidRequest);
}

TEST(PolicyTest, TotalIsWeightedSumAndTraceKeepsEachCost) {
  const Policy p = Make({}, {{std::make_shared<FixedScorer>(std::vector<double>{1.0, 4.0}), 2.0},
                             {NewInflightRequestsScorer(), 0.5}});
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2)};
  ws[0].inflight_requests = 10;  // total 2*1 + 0.5*10 = 7
  ws[1].inflight_requests = 0;   // total 2*4 + 0.5*0 = 8
  PolicyState state(1);
  auto d = p.Decide(Request(64), ws, state);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->chosen, 1u);
  EXPECT_EQ(d->candidates[0].costs, (std::vector<double>{1.0, 10.0}));
  EXPECT_DOUBLE_EQ(*d->candidates[0].total_cost, 7.0);
  EXPECT_DOUBLE_EQ(*d->candidates[1].total_cost, 8.0);
  EXPECT_NE(RenderDecision(*d).find("chose worker 1"), std::string::npos);
}

TEST(PolicyTest, RequiredInputsIsTheUnionOfPluginNeeds) {
  const Policy p = Make({{NewHealthyFilter()}, {NewItlGuardFilter({})}},
                        {{std::make_shared<FixedScorer>(std::vector<double>{}), 1.0}});
  EXPECT_EQ(p.RequiredInputs(), kCacheView | kRouterLoad | kRates | kScrapedMetrics);
  EXPECT_EQ(InputsToString(p.RequiredInputs()), "cache_view|router_load|scraped_metrics|rates");
}

TEST(PolicyTest, CacheViewsAreMatchedByWorkerIdNotPosition) {
  const Policy p = Make({}, {{NewPrefixMissScorer(), 1.0}});
  const std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2)};
  RequestProfile r = Request(320);
  r.cache_views = {View(2, 20)};  // only worker 2 holds the prompt
  PolicyState state(1);
  auto d = p.Decide(r, ws, state);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->chosen, 2u);
  EXPECT_DOUBLE_EQ(d->candidates[0].costs[0], 1.0);
  EXPECT_DOUBLE_EQ(d->candidates[1].costs[0], 0.0);
}

TEST(PolicyTest, StaleCacheViewIsRecordedInTheTrace) {
  const Policy p = Make({{NewHealthyFilter()}}, {{NewPrefixMissScorer(), 1.0}});
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2)};
  ws[1].healthy = false;
  RequestProfile r = Request(320);
  r.cache_views = {View(1, 20)};
  r.cache_views[0].stale = true;
  PolicyState state(1);
  auto d = p.Decide(r, ws, state);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->candidates[0].cache_stale);
  const std::string text = RenderDecision(*d);
  EXPECT_NE(text.find("1 w1 (stale cache view) prefix_miss=0x1 total=0"), std::string::npos)
      << text;
  EXPECT_NE(text.find("2 w2: dropped by healthy: unhealthy"), std::string::npos) << text;
}

TEST(PolicyTest, SnapshotOrderDoesNotChangeTheChoice) {
  const Policy p = Make({}, {{NewInflightRequestsScorer(), 1.0}}, NewSoftmaxPicker(1.0));
  std::vector<WorkerSnapshot> ws = {Worker(1), Worker(2), Worker(3), Worker(4)};
  for (std::size_t i = 0; i < ws.size(); ++i)
    ws[i].inflight_requests = static_cast<std::uint32_t>(i % 2);
  std::vector<WorkerSnapshot> reversed(ws.rbegin(), ws.rend());
  PolicyState a(77), b(77);
  for (int i = 0; i < 200; ++i) {
    auto da = p.Decide(Request(64), ws, a);
    auto db = p.Decide(Request(64), reversed, b);
    ASSERT_TRUE(da.has_value() && db.has_value());
    EXPECT_EQ(da->chosen, db->chosen);
  }
}

// kChosenOnly is the same decision (same worker, same PolicyState draws, same chosen trace)
// without the other candidates' traces, over policies that filter, score, sample and read
// rates, with cache views given out of worker order.
TEST(PolicyTest, ChosenOnlyDetailMakesTheSameChoiceAndKeepsTheChosenTrace) {
  const Policy p = Make({{NewHealthyFilter()}, {NewItlGuardFilter({}), IfAllDropped::kKeepAll}},
                        {{NewPredictedTtftScorer(), 1.0}, {NewInflightRequestsScorer(), 0.01}},
                        NewSoftmaxPicker(0.5));
  std::vector<WorkerSnapshot> ws;
  for (WorkerId id = 0; id < 12; ++id) {
    WorkerSnapshot w = Worker(id);
    w.healthy = id % 5 != 3;
    w.inflight_requests = id % 4;
    w.pending_prefill_tokens = (id * 977) % 3000;
    w.active_kv_blocks = (id * 131) % 700;
    w.prefill_tokens_per_s = 10000 + 500 * id;
    w.decode_step = StepTimeModel{.base_s = 0.01, .per_sequence_s = 1e-4, .per_kv_token_s = 1e-8};
    w.kv_bytes_per_block = 1 << 20;
    ws.push_back(w);
  }
  RequestProfile r = Request(1600);
  r.predicted_output_tokens = 64;
  r.cache_views = {View(9, 40), View(2, 90), View(5, 10, 30)};
  PolicyState full_state(5), lean_state(5);
  for (int i = 0; i < 100; ++i) {
    auto full = p.Decide(r, ws, full_state, TraceDetail::kFull);
    auto lean = p.Decide(r, ws, lean_state, TraceDetail::kChosenOnly);
    ASSERT_TRUE(full.has_value() && lean.has_value());
    ASSERT_TRUE(full->chosen.has_value());
    EXPECT_EQ(lean->chosen, full->chosen);
    ASSERT_EQ(full->candidates.size(), ws.size());
    ASSERT_EQ(lean->candidates.size(), 1u);
    const CandidateTrace& a = *full->Find(*full->chosen);
    const CandidateTrace& b = lean->candidates[0];
    EXPECT_EQ(b.worker, a.worker);
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.costs, a.costs);
    EXPECT_EQ(b.total_cost, a.total_cost);
    EXPECT_EQ(b.probability, a.probability);
    EXPECT_EQ(b.predicted_ttft_s, a.predicted_ttft_s);
    EXPECT_EQ(b.predicted_itl_s, a.predicted_itl_s);
    EXPECT_EQ(lean->notes, full->notes);
    ws[*full->chosen].inflight_requests += 1;  // vary the inputs between decisions
  }
}

TEST(PolicyTest, ChosenOnlyDetailStillSaysWhyNoWorker) {
  const Policy p = Make({{NewHealthyFilter()}}, {});
  std::vector<WorkerSnapshot> ws = {Worker(1)};
  ws[0].healthy = false;
  PolicyState state(1);
  auto d = p.Decide(Request(64), ws, state, TraceDetail::kChosenOnly);
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->chosen.has_value());
  EXPECT_TRUE(d->candidates.empty());
  EXPECT_NE(d->why_none.find("healthy"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::sched
