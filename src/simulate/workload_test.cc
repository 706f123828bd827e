#include "simulate/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tokenize/simple_tokenizer.h"

namespace kvroute::simulate {
namespace {

// OnDone's arrivals when there is at most one (every case but the end of a warm-up step).
std::optional<Arrival> One(std::vector<Arrival> arrivals) {
  EXPECT_LE(arrivals.size(), 1u);
  if (arrivals.empty()) return std::nullopt;
  return std::move(arrivals.front());
}

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
  auto next = One(w->OnDone(first->request, output, true, Nanos(1000)));
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
  auto last_turn = One(w->OnDone(s0->request, {}, true, Nanos(5)));
  ASSERT_TRUE(last_turn.has_value());
  auto third = One(w->OnDone(last_turn->request, {}, true, Nanos(9)));
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->request.session, 2);
  EXPECT_EQ(third->request.turn, 0);
}

// vLLM's multi-turn tool with --warmup-step (Infera's sweep): every session's first turn
// first, `concurrency` at a time and unmeasured; when the last is done every client starts on
// its session's second turn at once, its prompt built on the warm-up answer.
TEST(SimWorkloadTest, WarmupStepSendsEveryFirstTurnThenReleasesTheSecondTurnsTogether) {
  AgenticSimOptions o = SmallAgentic();  // 3 sessions, 2 at a time
  o.shape.turns = 3;
  o.procedure.warmup_step = true;
  auto w = NewAgenticWorkload(o);
  auto s0 = w->Next();
  auto s1 = w->Next();
  ASSERT_TRUE(s0 && s1);
  EXPECT_FALSE(w->Next().has_value());
  EXPECT_TRUE(s0->request.warmup && s1->request.warmup);
  // A client done with its warm-up turn takes the next session's first turn.
  const std::vector<TokenId> answer = {5, 6};
  auto s2 = One(w->OnDone(s0->request, answer, true, Nanos(10)));
  ASSERT_TRUE(s2.has_value());
  EXPECT_EQ(s2->request.session, 2);
  EXPECT_EQ(s2->request.turn, 0);
  EXPECT_TRUE(s2->request.warmup);
  EXPECT_TRUE(w->OnDone(s1->request, {}, true, Nanos(20)).empty());  // the step is not over
  std::vector<Arrival> measured = w->OnDone(s2->request, {}, true, Nanos(30));
  ASSERT_EQ(measured.size(), 2u);  // one per client, both at the end of the step
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(measured[i].request.session, i);
    EXPECT_EQ(measured[i].request.turn, 1);
    EXPECT_FALSE(measured[i].request.warmup);
    EXPECT_EQ(measured[i].at, Nanos(30));
  }
  // Session 0's second turn extends its warm-up prompt with the warm-up answer.
  const auto& p = measured[0].request.prompt;
  ASSERT_EQ(p.size(), s0->request.prompt.size() + answer.size() + 16);
  EXPECT_TRUE(std::equal(s0->request.prompt.begin(), s0->request.prompt.end(), p.begin()));
  EXPECT_EQ(p[s0->request.prompt.size()], 5u);
  // A client whose session ends takes the third session at its second turn.
  auto t2 = One(w->OnDone(measured[0].request, {}, true, Nanos(40)));
  ASSERT_TRUE(t2.has_value());
  auto next = One(w->OnDone(t2->request, {}, true, Nanos(50)));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->request.session, 2);
  EXPECT_EQ(next->request.turn, 1);
  EXPECT_FALSE(w->stopped());
}

// The tool's default early stop: the first client without a session left stops the level.
TEST(SimWorkloadTest, EarlyStopEndsTheLevelWhenTheFirstClientRunsOutOfSessions) {
  for (bool early_stop : {false, true}) {
    AgenticSimOptions o = SmallAgentic();
    o.shape.sessions = 2;  // one session per client
    o.procedure.early_stop = early_stop;
    auto w = NewAgenticWorkload(o);
    auto s0 = w->Next();
    auto s1 = w->Next();
    ASSERT_TRUE(s0 && s1);
    auto s0_last = One(w->OnDone(s0->request, {}, true, Nanos(1)));
    ASSERT_TRUE(s0_last.has_value());
    EXPECT_FALSE(w->stopped());
    EXPECT_FALSE(One(w->OnDone(s0_last->request, {}, true, Nanos(2))).has_value());
    EXPECT_EQ(w->stopped(), early_stop);
    // Session 1's turn in flight finishes; its follow-up is sent only without early stop.
    EXPECT_EQ(One(w->OnDone(s1->request, {}, true, Nanos(3))).has_value(), !early_stop);
  }
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

// Fidelity (docs/simulation.md): sessions whose turns end in the same engine step must not
// all send their next turn at that same instant, or they stay in lockstep for the whole run.
TEST(SimWorkloadTest, TurnJitterSpreadsNextTurnsWithinTheBound) {
  AgenticSimOptions o = SmallAgentic();
  o.think_time = std::chrono::milliseconds(2);
  o.turn_jitter = std::chrono::milliseconds(15);
  o.concurrency = 3;
  auto w = NewAgenticWorkload(o);
  std::vector<Arrival> first;
  while (auto a = w->Next()) first.push_back(std::move(*a));
  ASSERT_EQ(first.size(), 3u);
  const Nanos now = std::chrono::seconds(1);
  std::set<Nanos::rep> times;
  for (const Arrival& a : first) {
    auto next = One(w->OnDone(a.request, {}, true, now));
    ASSERT_TRUE(next.has_value());
    EXPECT_GE(next->at, now + o.think_time);
    EXPECT_LT(next->at, now + o.think_time + o.turn_jitter);
    times.insert(next->at.count());
  }
  EXPECT_EQ(times.size(), 3u);  // three sessions, three different send times
}

TEST(SimWorkloadTest, ZeroTurnJitterSendsAfterExactlyTheThinkTime) {
  AgenticSimOptions o = SmallAgentic();
  o.think_time = std::chrono::milliseconds(2);
  auto w = NewAgenticWorkload(o);
  auto a = w->Next();
  ASSERT_TRUE(a.has_value());
  const Nanos now = std::chrono::seconds(1);
  auto next = One(w->OnDone(a->request, {}, true, now));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->at, now + o.think_time);
}

// Fidelity (docs/simulation.md): `kvroute bench` and `kvroute simulate` pause the same time
// after the same (seed, session, turn): the simulator schedules exactly workload::AgenticTurnPause.
TEST(SimWorkloadTest, FollowUpArrivesAfterTheBenchClientsOwnPause) {
  for (std::uint64_t seed : {1u, 2u, 99u}) {
    AgenticSimOptions o = SmallAgentic();
    o.shape.seed = seed;
    o.shape.sessions = 6;
    o.shape.turns = 3;
    o.think_time = std::chrono::milliseconds(3);
    o.turn_jitter = std::chrono::milliseconds(100);
    auto w = NewAgenticWorkload(o);
    std::vector<Arrival> pending;
    while (auto a = w->Next()) pending.push_back(std::move(*a));
    Nanos now = std::chrono::seconds(1);
    int checked = 0;
    while (!pending.empty() && checked < 100) {
      Arrival a = std::move(pending.back());
      pending.pop_back();
      auto next = One(w->OnDone(a.request, {}, true, now));
      if (next) {
        EXPECT_EQ(next->at - now, workload::AgenticTurnPause({o.think_time, o.turn_jitter}, seed,
                                                          a.request.session, a.request.turn))
            << "seed " << seed << " session " << a.request.session << " turn " << a.request.turn;
        pending.push_back(std::move(*next));
        ++checked;
      }
      now += std::chrono::milliseconds(7);
    }
    EXPECT_EQ(checked, 6 * 3 - 2);  // every request but each worker's last is followed
  }
}

// Fidelity (docs/simulation.md): a simulated shared-prefix level sends kvroute bench's groups
// in kvroute bench's order at kvroute bench's arrival times for the same seed and rate.
TEST(SimWorkloadTest, SharedPrefixSendsBenchOrderAtBenchArrivalTimes) {
  SharedPrefixSimOptions o;
  o.shape.groups = 5;
  o.shape.prompts_per_group = 3;
  o.shape.system_prompt_tokens = 8;
  o.shape.question_tokens = 4;
  o.shape.seed = 7;
  o.rate_per_s = 4;
  o.requests = 20;  // more than the 15 prompts: the order wraps around as bench's does
  auto w = NewSharedPrefixWorkload(o);
  std::vector<Arrival> all;
  while (auto a = w->Next()) all.push_back(std::move(*a));
  ASSERT_EQ(all.size(), 20u);

  tokenize::SimpleTokenizer tok;
  const auto prompts = workload::MakeSharedPrefixPrompts(tok, o.shape);
  const auto times = workload::PoissonArrivals(20, o.rate_per_s, o.shape.seed);
  ASSERT_EQ(prompts.size(), 15u);
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].request.session, prompts[i % prompts.size()].group) << i;
    EXPECT_NEAR(ToSeconds(all[i].at), times[i], 1e-6) << i;
  }
}

TEST(SimWorkloadTest, TraceReplicasKeepArrivalsAndGetDisjointPrefixes) {
  auto trace = std::make_shared<workload::Trace>();
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
