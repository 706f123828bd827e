#include "simulate/workload.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kvroute::simulate {
namespace {

AgenticSimOptions SmallAgentic() {
  AgenticSimOptions o;
  o.shape.sessions = 3;
  o.shape.common_prefix_tokens = 64;
  o.shape.session_prefix_tokens = 32;
  o.shape.turns = 2;
  o.shape.turn_input_tokens = 16;
  o.shape.output_tokens = 8;
  o.concurrency = 2;
  return o;
}

TEST(SimWorkloadTest, AgenticNextTurnIsHistoryPlusOutputPlusNewInput) {
  auto w = NewAgenticWorkload(SmallAgentic());
  auto first = w->Next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->request.prompt.size(), 64u + 32u + 16u);
  const std::vector<TokenId> output = {7, 8, 9};
  auto next = w->OnDone(first->request, output, true, Nanos(1000));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->at, Nanos(1000));
  EXPECT_EQ(next->request.turn, 1);
  const auto& p = next->request.prompt;
  ASSERT_EQ(p.size(), first->request.prompt.size() + 3 + 16);
  EXPECT_TRUE(std::equal(first->request.prompt.begin(), first->request.prompt.end(), p.begin()));
  EXPECT_EQ(p[first->request.prompt.size()], 7u);
}

TEST(SimWorkloadTest, AgenticStartsConcurrencySessionsThenReplacesFinishedOnes) {
  auto w = NewAgenticWorkload(SmallAgentic());
  auto s0 = w->Next();
  auto s1 = w->Next();
  ASSERT_TRUE(s0 && s1);
  EXPECT_FALSE(w->Next().has_value());
  // Sessions share the common prefix and differ after it.
  EXPECT_TRUE(std::equal(s0->request.prompt.begin(), s0->request.prompt.begin() + 64,
                         s1->request.prompt.begin()));
  EXPECT_NE(s0->request.prompt, s1->request.prompt);
  auto last_turn = w->OnDone(s0->request, {}, true, Nanos(5));
  ASSERT_TRUE(last_turn.has_value());
  auto third = w->OnDone(last_turn->request, {}, true, Nanos(9));
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->request.session, 2);
  EXPECT_EQ(third->request.turn, 0);
}

TEST(SimWorkloadTest, SharedPrefixGroupsShareTheirSystemPromptAndArrivalsIncrease) {
  SharedPrefixSimOptions o;
  o.shape.groups = 3;
  o.shape.prompts_per_group = 4;
  o.shape.system_prompt_tokens = 48;
  o.shape.question_tokens = 16;
  o.rate_per_s = 10;
  auto w = NewSharedPrefixWorkload(o);
  std::vector<Arrival> all;
  while (auto a = w->Next()) all.push_back(std::move(*a));
  ASSERT_EQ(all.size(), 12u);
  for (std::size_t i = 1; i < all.size(); ++i) EXPECT_GE(all[i].at, all[i - 1].at);
  for (const auto& x : all) {
    for (const auto& y : all) {
      const bool same_prefix = std::equal(x.request.prompt.begin(), x.request.prompt.begin() + 48,
                                          y.request.prompt.begin());
      EXPECT_EQ(same_prefix, x.request.session == y.request.session);
    }
  }
}

TEST(SimWorkloadTest, TraceReplicasKeepArrivalsAndGetDisjointPrefixes) {
  auto trace = std::make_shared<bench::Trace>();
  trace->hash_block_tokens = 512;
  trace->requests = {{0.0, 1024, 4, {0, 1}}, {2.0, 1024, 4, {0, 2}}};
  TraceSimOptions o;
  o.replicas = 2;
  o.speedup = 2;
  o.prefix_multiplier = 1.0 / 16;  // 32-token blocks
  auto w = NewTraceWorkload(trace, o);
  std::vector<Arrival> all;
  while (auto a = w->Next()) all.push_back(std::move(*a));
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[2].at, std::chrono::seconds(1));
  EXPECT_EQ(all[0].request.prompt.size(), 64u);
  // Same replica: requests 0 and 2 share hash id 0; the other replica does not.
  EXPECT_TRUE(std::equal(all[0].request.prompt.begin(), all[0].request.prompt.begin() + 32,
                         all[2].request.prompt.begin()));
  EXPECT_FALSE(std::equal(all[0].request.prompt.begin(), all[0].request.prompt.begin() + 32,
                          all[1].request.prompt.begin()));
}

}  // namespace
}  // namespace kvroute::simulate
