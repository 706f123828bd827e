#include "bench/workload.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "tokenize/simple_tokenizer.h"

namespace kvroute::bench {
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
  AgenticOptions opt{.sessions = 3, .common_prefix_tokens = 500, .session_prefix_tokens = 300,
                     .turns = 4, .turn_input_tokens = 100, .output_tokens = 50};
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
  SharedPrefixOptions opt{.groups = 4, .prompts_per_group = 5, .system_prompt_tokens = 200,
                          .question_tokens = 40, .output_tokens = 10};
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

}  // namespace
}  // namespace kvroute::bench
