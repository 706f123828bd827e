#include "workload/conversation_trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>

namespace kvroute::workload {
namespace {

ConversationTraceOptions Small() {
  ConversationTraceOptions o;
  o.conversations = 300;
  o.seed = 7;
  return o;
}

TEST(ConversationTraceTest, SameOptionsGiveTheSameTraceByteForByte) {
  auto a = MakeConversationTrace(Small());
  auto b = MakeConversationTrace(Small());
  ASSERT_TRUE(a && b);
  std::ostringstream ja, jb;
  WriteMooncakeJsonl(*a, ja);
  WriteMooncakeJsonl(*b, jb);
  EXPECT_EQ(ja.str(), jb.str());
  ConversationTraceOptions other = Small();
  other.seed = 8;
  std::ostringstream jc;
  WriteMooncakeJsonl(*MakeConversationTrace(other), jc);
  EXPECT_NE(ja.str(), jc.str());
}

TEST(ConversationTraceTest, RoundTripsThroughTheMooncakeParser) {
  auto t = MakeConversationTrace(Small());
  ASSERT_TRUE(t);
  std::stringstream s;
  WriteMooncakeJsonl(*t, s);
  auto back = ParseMooncakeJsonl(s);
  ASSERT_TRUE(back) << back.error();
  ASSERT_EQ(back->requests.size(), t->requests.size());
  EXPECT_EQ(back->hash_block_tokens, kConversationBlockTokens);
  for (std::size_t i = 0; i < t->requests.size(); ++i) {
    EXPECT_NEAR(back->requests[i].arrival_s, t->requests[i].arrival_s, 1e-9);
    EXPECT_EQ(back->requests[i].input_tokens, t->requests[i].input_tokens);
    EXPECT_EQ(back->requests[i].output_tokens, t->requests[i].output_tokens);
    EXPECT_EQ(back->requests[i].hash_ids, t->requests[i].hash_ids);
  }
}

// Every request's ids cover its prompt and arrivals are sorted. An id names one prefix: all
// requests holding id X at position p agree on positions 0..p (what a prefix cache relies
// on). Only the system prompts' ids are shared between conversations; private ids are reused
// only by the later turns of their own conversation, so they recur far less often.
TEST(ConversationTraceTest, PrefixesArePrivateChainsBehindSharedSystemPrompts) {
  auto t = MakeConversationTrace(Small());
  ASSERT_TRUE(t);
  const ConversationTraceOptions o = Small();
  const std::uint64_t sys_ids = static_cast<std::uint64_t>(o.system_prompts) *
                                (o.system_prompt_tokens / kConversationBlockTokens);
  double last = 0;
  std::map<std::pair<std::size_t, std::uint64_t>, std::vector<std::uint64_t>> prefix_of;
  std::map<std::uint64_t, int> uses;
  std::set<std::uint64_t> sys_used;
  for (const TraceRequest& r : t->requests) {
    EXPECT_GE(r.arrival_s, last);
    last = r.arrival_s;
    EXPECT_EQ(r.hash_ids.size(), (r.input_tokens + 511) / 512);
    ASSERT_GT(r.hash_ids.size(), 3u);
    for (std::size_t p = 0; p < r.hash_ids.size(); ++p) {
      EXPECT_EQ(p < 3, r.hash_ids[p] < sys_ids) << "system blocks come first, and only there";
      std::vector<std::uint64_t> prefix(r.hash_ids.begin(), r.hash_ids.begin() + p);
      auto [it, fresh] = prefix_of.try_emplace({p, r.hash_ids[p]}, prefix);
      if (!fresh) {
        EXPECT_EQ(it->second, prefix) << "id " << r.hash_ids[p] << " at " << p;
      }
      ++uses[r.hash_ids[p]];
    }
    sys_used.insert(r.hash_ids[0]);
  }
  EXPECT_GT(sys_used.size(), 1u);
  int most_private = 0, least_system = 1 << 30;
  for (const auto& [id, n] : uses) {
    if (id < sys_ids) least_system = std::min(least_system, n);
    else most_private = std::max(most_private, n);
  }
  EXPECT_LE(most_private, o.max_turns);  // one conversation's turns at most
  EXPECT_GT(least_system, most_private / 4);
}

TEST(ConversationTraceTest, HasTheShapeItPromises) {
  ConversationTraceOptions o;  // the defaults
  auto t = MakeConversationTrace(o);
  ASSERT_TRUE(t);
  const double n = static_cast<double>(t->requests.size());
  double tokens = 0;
  int past_40k = 0;
  for (const TraceRequest& r : t->requests) {
    tokens += r.input_tokens;
    past_40k += r.input_tokens > 40960 ? 1 : 0;
  }
  // ~mean_turns requests per conversation, ~conversations_per_s * mean_turns req/s overall.
  EXPECT_NEAR(n / o.conversations, o.mean_turns, 1.0);
  const double rate = n / t->requests.back().arrival_s;
  EXPECT_GT(rate, 2.0);
  EXPECT_LT(rate, 6.0);
  // A heavy tail: a mean prompt in the ~10-20k range and some prompts past a 40k context.
  EXPECT_GT(tokens / n, 8000);
  EXPECT_LT(tokens / n, 25000);
  EXPECT_GT(past_40k, 0);
  EXPECT_LT(past_40k / n, 0.2);
}

TEST(ConversationTraceTest, BurstsRaiseTheArrivalRate) {
  ConversationTraceOptions o = Small();
  o.conversations = 2000;
  o.mean_turns = 1;  // one request per conversation: arrivals are the conversation starts
  auto t = MakeConversationTrace(o);
  ASSERT_TRUE(t);
  int in = 0, out = 0;
  for (const TraceRequest& r : t->requests) {
    (std::fmod(r.arrival_s, o.burst_every_s) < o.burst_length_s ? in : out) += 1;
  }
  // Inside a burst: burst_factor x the base rate over a tenth of the time.
  const double in_rate = in / o.burst_length_s, out_rate = out / (o.burst_every_s - o.burst_length_s);
  EXPECT_GT(in_rate / out_rate, 2.5);
  EXPECT_LT(in_rate / out_rate, 6.0);
}

TEST(ConversationTraceTest, RejectsBadOptions) {
  ConversationTraceOptions o;
  o.conversations = 0;
  EXPECT_FALSE(MakeConversationTrace(o));
  o = {};
  o.mean_turns = 0.5;
  EXPECT_FALSE(MakeConversationTrace(o));
  o = {};
  o.burst_length_s = o.burst_every_s + 1;
  auto e = MakeConversationTrace(o);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("burst_length_s"), std::string::npos) << e.error();
}

}  // namespace
}  // namespace kvroute::workload
