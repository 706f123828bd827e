// `kvroute simulate` with no flags must serve (nearly) every request: the default agentic
// sessions, on the default fleet (8 workers of the default profile) with the default policy.
// Its contexts used to reach ~118k tokens on a 40,960-token profile, and 216 of 240 requests
// failed with nothing said.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/profile.h"
#include "sched/registry.h"
#include "simulate/simulator.h"
#include "simulate/workload.h"

namespace kvroute::simulate {
namespace {

engine::Profile DefaultProfile() {
  auto p = engine::LoadProfile(engine::kDefaultProfileName);
  EXPECT_TRUE(p.has_value());
  return p ? *p : engine::Profile{};
}

TEST(SimulateDefaultsTest, TheDefaultSessionsFitTheDefaultProfile) {
  EXPECT_LE(LongestAgenticRequestTokens(DefaultAgenticShape()), DefaultProfile().max_model_len);
  // Infera's shape (bench's defaults) does not: it needs max_model_len 131072.
  EXPECT_GT(LongestAgenticRequestTokens(workload::AgenticOptions{}), DefaultProfile().max_model_len);
  EXPECT_LE(LongestAgenticRequestTokens(workload::AgenticOptions{}), 131072u);
}

SimOptions DefaultFleet(std::uint32_t max_model_len = 0) {
  SimOptions o;
  WorkerSpec w;
  w.profile = DefaultProfile();
  w.config.max_model_len = max_model_len;
  o.fleet.workers.assign(8, w);
  auto policy = sched::BuiltinPolicy("predicted_latency");
  EXPECT_TRUE(policy.has_value());
  if (policy) o.policy = *policy;
  return o;
}

TEST(SimulateDefaultsTest, TheDefaultRunServesEveryRequest) {
  AgenticSimOptions a;
  a.shape = DefaultAgenticShape();
  a.concurrency = 8;  // --concurrency's default
  Simulator sim(DefaultFleet(), NewAgenticWorkload(a));
  auto r = sim.Run();
  ASSERT_TRUE(r.has_value()) << r.error();
  const auto& requests = r->level.requests;
  EXPECT_EQ(requests.size(),
            static_cast<std::size_t>(a.shape.sessions) * static_cast<std::size_t>(a.shape.turns));
  EXPECT_TRUE(std::ranges::all_of(requests, [](const auto& q) { return q.result.ok; }));
  EXPECT_EQ(r->rejected, 0u);
  // The longest request is the one LongestAgenticRequestTokens computes.
  std::uint64_t longest = 0;
  for (const auto& d : r->decisions) longest = std::max(longest, d.prompt_tokens);
  EXPECT_EQ(longest + a.shape.output_tokens, LongestAgenticRequestTokens(a.shape));
}

TEST(SimulateDefaultsTest, RequestsOverMaxModelLenAreRejectedWithTheEnginesReason) {
  AgenticSimOptions a;
  a.shape = DefaultAgenticShape();
  a.shape.sessions = 2;
  a.concurrency = 2;
  // Turns 0-2 fit 12,000 tokens (6,000 + 3 x 1,700 = 11,100), turn 3 does not.
  Simulator sim(DefaultFleet(12000), NewAgenticWorkload(a));
  auto r = sim.Run();
  ASSERT_TRUE(r.has_value()) << r.error();
  std::size_t failed = 0;
  for (const auto& q : r->level.requests) {
    if (q.result.ok) continue;
    ++failed;
    EXPECT_EQ(q.result.error_kind, "http_4xx");
  }
  EXPECT_EQ(failed, 2u * 7u);
  EXPECT_EQ(r->rejected, failed);
  EXPECT_NE(r->first_rejection.find("exceeds max_model_len 12000"), std::string::npos)
      << r->first_rejection;
}

}  // namespace
}  // namespace kvroute::simulate
