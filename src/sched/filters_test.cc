#include "sched/filters.h"

#include <gtest/gtest.h>

#include <vector>

#include "sched/test_util.h"

namespace kvroute::sched {
namespace {

using testing::Request;
using testing::View;
using testing::Worker;

std::vector<FilterVerdict> Verdicts(const Filter& f, const RequestProfile& r,
                                    const std::vector<Candidate>& cs) {
  auto v = f.Apply(r, cs);
  EXPECT_TRUE(v.has_value()) << (v ? "" : v.error().message);
  return v ? *v : std::vector<FilterVerdict>{};
}

TEST(HealthyFilterTest, DropsUnhealthyWorkers) {
  WorkerSnapshot a = Worker(1), b = Worker(2);
  b.healthy = false;
  auto v = Verdicts(*NewHealthyFilter(), Request(64), {{&a, {}}, {&b, {}}});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(v[0].keep);
  EXPECT_FALSE(v[1].keep);
  EXPECT_EQ(v[1].reason, "unhealthy");
}

TEST(NotDrainingFilterTest, DropsDrainingWorkers) {
  WorkerSnapshot a = Worker(1);
  a.draining = true;
  auto v = Verdicts(*NewNotDrainingFilter(), Request(64), {{&a, {}}});
  EXPECT_FALSE(v.at(0).keep);
  EXPECT_EQ(v.at(0).reason, "draining");
}

TEST(ModelFilterTest, DropsWorkersServingAnotherModel) {
  WorkerSnapshot a = Worker(1), b = Worker(2);
  b.models = {"mistral"};
  auto v = Verdicts(*NewModelFilter(), Request(64), {{&a, {}}, {&b, {}}});
  EXPECT_TRUE(v.at(0).keep);
  EXPECT_FALSE(v.at(1).keep);
  EXPECT_NE(v.at(1).reason.find("llama"), std::string::npos);
}

TEST(ModelFilterTest, RequiresTheLoraAdapterWhenAsked) {
  WorkerSnapshot a = Worker(1), b = Worker(2);
  b.models.push_back("sql-lora");
  RequestProfile r = Request(64);
  r.lora_name = "sql-lora";
  auto v = Verdicts(*NewModelFilter(), r, {{&a, {}}, {&b, {}}});
  EXPECT_FALSE(v.at(0).keep);
  EXPECT_TRUE(v.at(1).keep);
}

TEST(RoleFilterTest, KeepsOnlyAllowedRoles) {
  WorkerSnapshot a = Worker(1), b = Worker(2);
  b.role = Role::kDecode;
  auto v =
      Verdicts(*NewRoleFilter({Role::kMixed, Role::kPrefill}), Request(64), {{&a, {}}, {&b, {}}});
  EXPECT_TRUE(v.at(0).keep);
  EXPECT_FALSE(v.at(1).keep);
}

TEST(PrefixAffinityFilterTest, KeepsWorkersAtOrAboveThreshold) {
  WorkerSnapshot a = Worker(1), b = Worker(2);
  a.prefill_tokens_per_s = b.prefill_tokens_per_s = 1000;
  const RequestProfile r = Request(320);  // 20 blocks
  // a: 16/20 = 0.80 (kept), b: 15/20 = 0.75 (dropped)
  auto v = Verdicts(*NewPrefixAffinityFilter({}), r, {{&a, View(1, 16)}, {&b, View(2, 15)}});
  EXPECT_TRUE(v.at(0).keep);
  EXPECT_FALSE(v.at(1).keep);
}

TEST(PrefixAffinityFilterTest, DropsStickyWorkerPastTau) {
  WorkerSnapshot a = Worker(1);
  a.prefill_tokens_per_s = 1000;  // tau = 1000 * 14 = 14000 tokens
  a.pending_prefill_tokens = 13937;
  const RequestProfile r = Request(320);
  // 16/20 held: look-ahead = 13937 + 320 * 0.2 = 14001 > 14000
  auto v = Verdicts(*NewPrefixAffinityFilter({}), r, {{&a, View(1, 16)}});
  EXPECT_FALSE(v.at(0).keep);
  EXPECT_NE(v.at(0).reason.find("saturated"), std::string::npos);
  a.pending_prefill_tokens = 13936;  // 14000: not over tau
  EXPECT_TRUE(Verdicts(*NewPrefixAffinityFilter({}), r, {{&a, View(1, 16)}}).at(0).keep);
}

TEST(PrefixAffinityFilterTest, MissingRateIsAnError) {
  WorkerSnapshot a = Worker(1);
  auto v =
      NewPrefixAffinityFilter({})->Apply(Request(320), std::vector<Candidate>{{&a, View(1, 20)}});
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().code, SchedError::Code::kMissingInput);
  EXPECT_NE(v.error().message.find("prefix_affinity"), std::string::npos);
}

TEST(ItlGuardFilterTest, DropsWorkerThatWouldExceedSlo) {
  WorkerSnapshot a = Worker(1), b = Worker(2);
  a.decode_step = b.decode_step = StepTimeModel{.base_s = 0.01, .per_sequence_s = 0.001};
  a.inflight_requests = 100;  // 0.01 + 0.001 * 101 = 0.111 > 0.1
  b.inflight_requests = 10;   // 0.01 + 0.001 * 11 = 0.021
  auto v = Verdicts(*NewItlGuardFilter({.itl_slo_s = 0.1}), Request(64), {{&a, {}}, {&b, {}}});
  EXPECT_FALSE(v.at(0).keep);
  EXPECT_TRUE(v.at(1).keep);
}

TEST(ItlGuardFilterTest, RequestSloOverridesTheDefault) {
  WorkerSnapshot b = Worker(2);
  b.decode_step = StepTimeModel{.base_s = 0.01, .per_sequence_s = 0.001};
  b.inflight_requests = 10;  // 0.021
  RequestProfile r = Request(64);
  r.itl_slo_s = 0.02;
  EXPECT_FALSE(Verdicts(*NewItlGuardFilter({.itl_slo_s = 0.1}), r, {{&b, {}}}).at(0).keep);
}

// Keep (no reason strings, the simulator's path) must give Apply's verdicts for every
// filter, on a mix of workers that each filter keeps and drops.
TEST(FilterKeepTest, KeepGivesTheSameVerdictsAsApply) {
  std::vector<WorkerSnapshot> ws;
  for (WorkerId id = 1; id <= 6; ++id) {
    WorkerSnapshot w = Worker(id);
    w.prefill_tokens_per_s = 1000;
    w.decode_step = StepTimeModel{.base_s = 0.01, .per_sequence_s = 0.001};
    w.inflight_requests = id * 20;         // itl_guard drops the busiest
    w.pending_prefill_tokens = id * 3000;  // prefix_affinity's tau drops the most pending
    ws.push_back(w);
  }
  ws[1].healthy = false;
  ws[2].draining = true;
  ws[3].models = {"mistral"};
  ws[4].role = Role::kDecode;
  std::vector<Candidate> cs;
  for (const WorkerSnapshot& w : ws) cs.push_back({&w, View(w.id, w.id * 4)});
  const RequestProfile r = Request(320);
  const std::vector<std::shared_ptr<const Filter>> filters = {
      NewHealthyFilter(),
      NewNotDrainingFilter(),
      NewModelFilter(),
      NewRoleFilter({Role::kMixed}),
      NewPrefixAffinityFilter({.threshold = 0.5}),
      NewItlGuardFilter({.itl_slo_s = 0.08})};
  for (const auto& f : filters) {
    const std::vector<FilterVerdict> v = Verdicts(*f, r, cs);
    std::vector<char> keep;
    ASSERT_TRUE(f->Keep(r, cs, &keep).has_value()) << f->Name();
    ASSERT_EQ(keep.size(), v.size()) << f->Name();
    int kept = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      EXPECT_EQ(keep[i] != 0, v[i].keep) << f->Name() << " candidate " << i;
      kept += v[i].keep ? 1 : 0;
    }
    EXPECT_GT(kept, 0) << f->Name();
    EXPECT_LT(kept, static_cast<int>(v.size())) << f->Name();
  }
}

TEST(FilterKeepTest, KeepReportsTheSameErrorAsApply) {
  WorkerSnapshot a = Worker(1);  // no prefill rate
  std::vector<char> keep;
  auto k = NewPrefixAffinityFilter({})->Keep(Request(320),
                                             std::vector<Candidate>{{&a, View(1, 20)}}, &keep);
  ASSERT_FALSE(k.has_value());
  EXPECT_EQ(k.error().code, SchedError::Code::kMissingInput);
}

}  // namespace
}  // namespace kvroute::sched
