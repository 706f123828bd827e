#include "workload/workload.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "tokenize/simple_tokenizer.h"

namespace kvroute::workload {
namespace {

TEST(WorkloadTest, MakeTextReachesTheTokenCountClosely) {
  tokenize::SimpleTokenizer tok;
  for (std::uint32_t n : {1u, 50u, 2048u, 20000u}) {
    auto text = MakeText(tok, n, n);
    auto count = tok.Encode(text, false).size();
    EXPECT_GE(count, n);
    EXPECT_LE(count, n + n / 20 + 8) << n;
  }
  EXPECT_EQ(MakeText(tok, 100, 7), MakeText(tok, 100, 7));
  EXPECT_NE(MakeText(tok, 100, 7), MakeText(tok, 100, 8));
}

TEST(WorkloadTest, AgenticSessionsShareOnlyTheCommonPrefix) {
  tokenize::SimpleTokenizer tok;
  AgenticOptions opt{.sessions = 3,
                     .common_prefix_tokens = 500,
                     .session_prefix_tokens = 300,
                     .turns = 4,
                     .turn_input_tokens = 100,
                     .output_tokens = 50};
  auto sessions = MakeAgenticSessions(tok, opt);
  ASSERT_EQ(sessions.size(), 3u);
  for (const auto& s : sessions) {
    EXPECT_EQ(s.system_prompt, sessions[0].system_prompt);
    ASSERT_EQ(s.user_turns.size(), 4u);
    EXPECT_GE(tok.Encode(s.user_turns[0], false).size(), 400u);  // session prefix + first turn
    EXPECT_LT(tok.Encode(s.user_turns[1], false).size(), 120u);
    EXPECT_EQ(s.output_tokens, 50u);
  }
  EXPECT_NE(sessions[0].user_turns[0], sessions[1].user_turns[0]);
}

TEST(WorkloadTest, SharedPrefixGroupsHaveFivePromptsSharingASystemPrompt) {
  tokenize::SimpleTokenizer tok;
  SharedPrefixOptions opt{.groups = 4,
                          .prompts_per_group = 5,
                          .system_prompt_tokens = 200,
                          .question_tokens = 40,
                          .output_tokens = 10};
  auto prompts = MakeSharedPrefixPrompts(tok, opt);
  ASSERT_EQ(prompts.size(), 20u);
  std::map<int, std::string> system_of_group;
  std::map<std::string, int> distinct_systems;
  for (const auto& p : prompts) {
    auto [it, inserted] = system_of_group.emplace(p.group, p.system_prompt);
    EXPECT_EQ(it->second, p.system_prompt);
    distinct_systems[p.system_prompt]++;
  }
  EXPECT_EQ(distinct_systems.size(), 4u);
  for (auto& [text, n] : distinct_systems) EXPECT_EQ(n, 5);
}

TEST(WorkloadTest, PoissonArrivalsHaveTheRequestedMeanRate) {
  auto t = PoissonArrivals(20000, 5.0, 42);
  ASSERT_EQ(t.size(), 20000u);
  EXPECT_DOUBLE_EQ(t[0], 0);
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
  const double rate = (t.size() - 1) / t.back();
  EXPECT_NEAR(rate, 5.0, 0.25);  // 20k samples: sd of the mean gap ≈ 0.7 %
}

// The pause both `kvroute bench` and `kvroute simulate` use: a pure function of its inputs.
TEST(WorkloadTest, AgenticTurnPauseIsAPureFunctionOfSeedSessionAndTurn) {
  const TurnPause p{std::chrono::milliseconds(5), std::chrono::milliseconds(100)};
  for (int s = 0; s < 20; ++s) {
    for (int t = 0; t < 5; ++t)
      EXPECT_EQ(AgenticTurnPause(p, 7, s, t), AgenticTurnPause(p, 7, s, t));
  }
}

TEST(WorkloadTest, AgenticTurnPauseStaysWithinThinkTimePlusJitter) {
  const TurnPause p{std::chrono::milliseconds(5), std::chrono::milliseconds(100)};
  std::set<Nanos::rep> distinct;
  Nanos sum{0};
  for (int s = 0; s < 50; ++s) {
    for (int t = 0; t < 10; ++t) {
      const Nanos d = AgenticTurnPause(p, 3, s, t);
      EXPECT_GE(d, p.think_time);
      EXPECT_LT(d, p.think_time + p.turn_jitter);
      distinct.insert(d.count());
      sum += d;
    }
  }
  EXPECT_GT(distinct.size(), 490u);  // spread, not a handful of values
  // Uniform over [5, 105) ms: the mean of 500 draws is near 55 ms.
  EXPECT_NEAR(ToSeconds(sum) / 500, 0.055, 0.008);
}

TEST(WorkloadTest, AgenticTurnPauseDependsOnTheSeed) {
  const TurnPause p{Nanos(0), std::chrono::milliseconds(100)};
  int same = 0;
  for (int s = 0; s < 20; ++s) same += AgenticTurnPause(p, 1, s, 0) == AgenticTurnPause(p, 2, s, 0);
  EXPECT_LT(same, 2);
}

TEST(WorkloadTest, AgenticTurnPauseWithoutJitterIsTheThinkTime) {
  EXPECT_EQ(AgenticTurnPause({}, 1, 3, 2), Nanos(0));
  EXPECT_FALSE(TurnPause{}.enabled());
  const TurnPause p{std::chrono::milliseconds(40), Nanos(0)};
  EXPECT_TRUE(p.enabled());
  EXPECT_EQ(AgenticTurnPause(p, 1, 3, 2), std::chrono::milliseconds(40));
}

}  // namespace
}  // namespace kvroute::workload
