// ServingObjectReconciler against a recording sink, fed InferenceObjective and
// InferenceModelRewrite JSON in the llm-d.ai/v1alpha2 shapes (lists, watch events). No API
// server runs here.
#include "k8s/objective_discovery.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvroute::k8s {
namespace {

namespace json = boost::json;

struct RecordingSink final : ServingObjectSink {
  std::vector<std::string> calls;
  void SetObjectives(std::string_view group, std::vector<Objective> objectives) override {
    std::string c = "objectives " + std::string(group) + ":";
    for (const auto& o : objectives) c += " " + o.name + "=" + std::to_string(o.priority);
    calls.push_back(c);
  }
  void SetRewrites(std::string_view group, std::vector<RewriteRule> rules) override {
    std::string c = "rewrites " + std::string(group) + ":";
    for (const auto& r : rules) {
      c += " " + r.object + "#" + std::to_string(r.index) + "[";
      for (const auto& m : r.models) c += m + ",";
      c += "->";
      for (const auto& t : r.targets) c += t.model + "*" + std::to_string(t.weight) + ",";
      c += "]";
    }
    calls.push_back(c);
  }
  std::vector<std::string> Take() { return std::exchange(calls, {}); }
};

json::object ObjectiveJson(const std::string& name, std::optional<int> priority, const std::string& pool = "qwen",
                       const std::string& rv = "5") {
  json::object spec{{"poolRef", json::object{{"group", "inference.networking.k8s.io"}, {"kind", "InferencePool"},
                                             {"name", pool}}}};
  if (priority) spec["priority"] = *priority;
  return {{"apiVersion", "llm-d.ai/v1alpha2"}, {"kind", "InferenceObjective"},
          {"metadata", json::object{{"name", name}, {"namespace", "llm"}, {"resourceVersion", rv}}},
          {"spec", spec}};
}

json::object RewriteJson(const std::string& name, const std::string& created, json::array rules,
                     const std::string& pool = "qwen") {
  return {{"apiVersion", "llm-d.ai/v1alpha2"}, {"kind", "InferenceModelRewrite"},
          {"metadata", json::object{{"name", name}, {"namespace", "llm"}, {"resourceVersion", "9"},
                                    {"creationTimestamp", created}}},
          {"spec", json::object{{"poolRef", json::object{{"name", pool}}}, {"rules", std::move(rules)}}}};
}

json::object Rule(std::vector<std::string> models, std::vector<std::pair<std::string, int>> targets) {
  json::array matches, to;
  for (const auto& m : models) matches.push_back(json::object{{"model", json::object{{"type", "Exact"}, {"value", m}}}});
  for (const auto& [model, weight] : targets) {
    json::object t{{"modelRewrite", model}};
    if (weight) t["weight"] = weight;
    to.push_back(t);
  }
  json::object r{{"targets", to}};
  if (!models.empty()) r["matches"] = matches;
  return r;
}

std::string List(json::array items, const std::string& rv = "100") {
  return json::serialize(json::object{{"kind", "InferenceObjectiveList"}, {"apiVersion", "llm-d.ai/v1alpha2"},
                                      {"metadata", json::object{{"resourceVersion", rv}}}, {"items", items}});
}
std::string Event(const std::string& type, const json::object& object) {
  return json::serialize(json::object{{"type", type}, {"object", object}});
}

TEST(ServingObjectReconciler, ObjectivesOfThisPoolWithTheirPriorityUnsetIsZero) {
  RecordingSink sink;
  ServingObjectReconciler rec(ServingKind::kObjective, "llm-d.ai", "qwen", &sink);
  auto rv = rec.ApplyList(List({ObjectiveJson("batch", -1), ObjectiveJson("chat", 10), ObjectiveJson("plain", std::nullopt),
                                ObjectiveJson("theirs", 5, "other-pool")}));
  ASSERT_TRUE(rv.has_value()) << rv.error();
  EXPECT_EQ(*rv, "100");
  EXPECT_EQ(sink.Take(), std::vector<std::string>{"objectives llm-d.ai: batch=-1 chat=10 plain=0"});
  EXPECT_EQ(rec.Members(), (std::vector<std::string>{"batch", "chat", "plain"}));
}

TEST(ServingObjectReconciler, WatchModifiesDeletesAndMovesObjectsBetweenPools) {
  RecordingSink sink;
  ServingObjectReconciler rec(ServingKind::kObjective, "llm-d.ai", "qwen", &sink);
  ASSERT_TRUE(rec.ApplyList(List({ObjectiveJson("batch", -1)})).has_value());
  sink.Take();
  EXPECT_EQ(rec.ApplyEvent(Event("MODIFIED", ObjectiveJson("batch", -5, "qwen", "101"))), WatchReconciler::Event::kApplied);
  EXPECT_EQ(rec.ApplyEvent(Event("ADDED", ObjectiveJson("chat", 3, "qwen", "102"))), WatchReconciler::Event::kApplied);
  EXPECT_EQ(rec.ApplyEvent(Event("MODIFIED", ObjectiveJson("batch", -5, "other", "103"))), WatchReconciler::Event::kApplied);
  EXPECT_EQ(rec.ApplyEvent(Event("DELETED", ObjectiveJson("chat", 3, "qwen", "104"))), WatchReconciler::Event::kApplied);
  EXPECT_EQ(sink.Take(), (std::vector<std::string>{"objectives llm-d.ai: batch=-5", "objectives llm-d.ai: batch=-5 chat=3",
                                                   "objectives llm-d.ai: chat=3", "objectives llm-d.ai:"}));
  EXPECT_EQ(rec.resource_version(), "104");
  EXPECT_EQ(rec.ApplyEvent(R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"200"}}})"),
            WatchReconciler::Event::kBookmark);
  EXPECT_EQ(rec.resource_version(), "200");
  EXPECT_EQ(rec.ApplyEvent(R"({"type":"ERROR","object":{"kind":"Status","code":410}})"), WatchReconciler::Event::kGone);
}

TEST(ServingObjectReconciler, RewriteRulesInOrderWithWeightsUnsetIsOne) {
  RecordingSink sink;
  ServingObjectReconciler rec(ServingKind::kModelRewrite, "inference.networking.x-k8s.io", "qwen", &sink);
  json::array rules{Rule({"small", "tiny"}, {{"small-v1", 90}, {"small-v2", 10}}), Rule({}, {{"base", 0}}),
                    Rule({"no-targets"}, {})};
  ASSERT_TRUE(rec.ApplyList(List({RewriteJson("canary", "2026-11-01T00:00:00Z", rules),
                                  RewriteJson("elsewhere", "2026-11-01T00:00:00Z", rules, "other")}))
                  .has_value());
  EXPECT_EQ(sink.Take(), std::vector<std::string>{
                             "rewrites inference.networking.x-k8s.io: canary#0[small,tiny,->small-v1*90,small-v2*10,] "
                             "canary#1[->base*1,]"});
}

TEST(ServingObjectReconciler, AMatchTypeOtherThanExactMatchesNothing) {
  RecordingSink sink;
  ServingObjectReconciler rec(ServingKind::kModelRewrite, "llm-d.ai", "qwen", &sink);
  json::object rule{{"matches", json::array{json::object{{"model", json::object{{"type", "Prefix"}, {"value", "sm"}}}}}},
                    {"targets", json::array{json::object{{"modelRewrite", "x"}}}}};
  ASSERT_TRUE(rec.ApplyList(List({RewriteJson("odd", "2026-11-01T00:00:00Z", json::array{rule})})).has_value());
  // Not a catch-all: its one criterion is there, matching no model name.
  EXPECT_EQ(sink.Take(), std::vector<std::string>{"rewrites llm-d.ai: odd#0[,->x*1,]"});
}

TEST(ServingObjectReconciler, AnEmptiedListLeavesNothing) {
  RecordingSink sink;
  ServingObjectReconciler rec(ServingKind::kObjective, "llm-d.ai", "qwen", &sink);
  ASSERT_TRUE(rec.ApplyList(List({ObjectiveJson("batch", -1)})).has_value());
  ASSERT_TRUE(rec.ApplyList(R"({"metadata":{"resourceVersion":""},"items":[]})").has_value());
  EXPECT_EQ(sink.Take(), (std::vector<std::string>{"objectives llm-d.ai: batch=-1", "objectives llm-d.ai:"}));
  EXPECT_FALSE(rec.ApplyList("not json").has_value());
}

}  // namespace
}  // namespace kvroute::k8s
