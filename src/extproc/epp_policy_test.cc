// EppPolicy: objectives merged from the config and the cluster's two API groups; model
// rewrite rules in the API's precedence with a deterministic weighted choice.
#include "extproc/epp_policy.h"

#include <gtest/gtest.h>

namespace kvroute::extproc {
namespace {

k8s::RewriteRule Rule(std::string object, std::string created, int index, std::vector<std::string> models,
                      std::vector<k8s::RewriteTarget> targets) {
  return {.object = std::move(object), .created = std::move(created), .index = index,
          .models = std::move(models), .targets = std::move(targets)};
}

TEST(EppPolicy, ClusterObjectivesOverrideAndExtendTheConfigCurrentGroupFirst) {
  EppPolicy p({{"batch", -1}, {"chat", 10}});
  EXPECT_EQ(p.Priority("batch"), -1);
  EXPECT_EQ(p.Priority("unknown"), 0);
  p.SetObjectives("inference.networking.x-k8s.io", {{"batch", -7}, {"legacy", 3}});
  p.SetObjectives("llm-d.ai", {{"batch", -2}, {"new", 4}});
  EXPECT_EQ(p.Priority("batch"), -2);  // llm-d.ai over x-k8s.io over the config
  EXPECT_EQ(p.Priority("legacy"), 3);
  EXPECT_EQ(p.Priority("new"), 4);
  EXPECT_EQ(p.Priority("chat"), 10);
  // A group's set is replaced whole: batch left llm-d.ai, so x-k8s.io's value shows.
  p.SetObjectives("llm-d.ai", {});
  EXPECT_EQ(p.Priority("batch"), -7);
  p.SetObjectives("inference.networking.x-k8s.io", {});
  EXPECT_EQ(p.Priority("batch"), -1);  // back to the config
  EXPECT_EQ(p.Priority("legacy"), 0);
}

TEST(EppPolicy, ExactMatchBeforeCatchAllOldestObjectFirst) {
  EppPolicy p;
  EXPECT_EQ(p.RewriteFor("small", 0), "");
  p.SetRewrites("llm-d.ai", {Rule("fallback", "2026-11-01T00:00:00Z", 0, {}, {{"base", 1}}),
                             Rule("newer", "2026-11-03T00:00:00Z", 0, {"small"}, {{"small-new", 1}}),
                             Rule("older", "2026-11-02T00:00:00Z", 0, {"small", "tiny"}, {{"small-v1", 1}})});
  EXPECT_EQ(p.RewriteFor("small", 0), "small-v1");  // the oldest object's rule for the model
  EXPECT_EQ(p.RewriteFor("tiny", 0), "small-v1");
  EXPECT_EQ(p.RewriteFor("other", 0), "base");  // no exact rule: the catch-all
}

TEST(EppPolicy, WeightedChoiceIsDeterministicPerKeyAndFollowsTheWeights) {
  EppPolicy p;
  p.SetRewrites("llm-d.ai", {Rule("canary", "2026-11-01T00:00:00Z", 0, {"m"}, {{"m-v1", 90}, {"m-v2", 10}})});
  // key mod 100: [0, 90) is m-v1, [90, 100) is m-v2.
  EXPECT_EQ(p.RewriteFor("m", 89), "m-v1");
  EXPECT_EQ(p.RewriteFor("m", 90), "m-v2");
  EXPECT_EQ(p.RewriteFor("m", 199), "m-v2");
  int v2 = 0;
  for (int i = 0; i < 10'000; ++i) {
    const std::uint64_t key = StableHash("req-" + std::to_string(i));
    EXPECT_EQ(p.RewriteFor("m", key), p.RewriteFor("m", key));
    v2 += p.RewriteFor("m", key) == "m-v2";
  }
  EXPECT_GT(v2, 800);  // 10% of 10,000, give or take the hash's spread
  EXPECT_LT(v2, 1200);
}

TEST(EppPolicy, AnObjectInBothGroupsCountsOnceFromTheCurrentGroup) {
  EppPolicy p;
  p.SetRewrites("inference.networking.x-k8s.io", {Rule("alias", "2026-11-01T00:00:00Z", 0, {"m"}, {{"old", 1}})});
  EXPECT_EQ(p.RewriteFor("m", 0), "old");
  p.SetRewrites("llm-d.ai", {Rule("alias", "2026-11-05T00:00:00Z", 0, {"m"}, {{"new", 1}})});
  EXPECT_EQ(p.RewriteFor("m", 0), "new");
  p.SetRewrites("llm-d.ai", {});
  EXPECT_EQ(p.RewriteFor("m", 0), "old");
}

TEST(StableHash, IsFnv1a64) {
  EXPECT_EQ(StableHash(""), 14695981039346656037ull);
  EXPECT_EQ(StableHash("a"), 0xaf63dc4c8601ec8cull);
}

}  // namespace
}  // namespace kvroute::extproc
