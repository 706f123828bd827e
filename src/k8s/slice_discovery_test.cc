// SliceReconciler against a recording sink, fed EndpointSlice JSON in the discovery.k8s.io/v1
// shapes (EndpointSliceList, watch events). No API server runs here.
#include "k8s/slice_discovery.h"

#include <gtest/gtest.h>

namespace kvroute::k8s {
namespace {

struct RecordingSink final : MembershipSink {
  std::vector<std::string> calls;
  std::expected<void, std::string> JoinWorker(fleet::WorkerSpec spec) override {
    calls.push_back("join " + spec.name + " " + spec.base_url);
    return {};
  }
  bool DrainWorker(std::string_view name) override {
    calls.push_back("drain " + std::string(name));
    return true;
  }
  bool LeaveWorker(std::string_view name) override {
    calls.push_back("leave " + std::string(name));
    return true;
  }
  std::vector<std::string> Take() { return std::exchange(calls, {}); }
};

// One endpoint: its pod, address and conditions ("" leaves a condition unset).
struct Ep {
  std::string pod, ip, ready = "true", serving = "true", terminating = "false";
};

std::string Slice(const std::string& name, const std::vector<Ep>& eps, const std::string& service = "vllm",
                  const std::string& rv = "7") {
  std::string out = R"({"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":")" + name +
                    R"(","namespace":"llm","resourceVersion":")" + rv +
                    R"(","labels":{"kubernetes.io/service-name":")" + service +
                    R"(","endpointslice.kubernetes.io/managed-by":"endpointslice-controller.k8s.io"}},)" +
                    R"("addressType":"IPv4","ports":[{"name":"http","port":8000,"protocol":"TCP"},)" +
                    R"({"name":"kv-events","port":5557,"protocol":"TCP"}],"endpoints":[)";
  for (std::size_t i = 0; i < eps.size(); ++i) {
    const Ep& e = eps[i];
    std::string cond;
    for (auto [k, v] : {std::pair{"ready", e.ready}, {"serving", e.serving}, {"terminating", e.terminating}}) {
      if (!v.empty()) cond += std::string(cond.empty() ? "" : ",") + "\"" + k + "\":" + v;
    }
    out += std::string(i ? "," : "") + R"({"addresses":[")" + e.ip + R"("],"conditions":{)" + cond +
           R"(},"targetRef":{"kind":"Pod","namespace":"llm","name":")" + e.pod + R"("}})";
  }
  return out + "]}";
}
std::string List(const std::vector<std::string>& slices, const std::string& rv = "1000") {
  std::string items;
  for (const auto& s : slices) items += (items.empty() ? "" : ",") + s;
  return R"({"kind":"EndpointSliceList","apiVersion":"discovery.k8s.io/v1","metadata":{"resourceVersion":")" + rv +
         R"("},"items":[)" + items + "]}";
}
std::string Event(const std::string& type, const std::string& object) {
  return R"({"type":")" + type + R"(","object":)" + object + "}";
}

PoolSpec Pool() {
  auto p = ParseInferencePool(R"({"kind":"InferencePool","metadata":{"name":"pool","namespace":"llm"},
    "spec":{"selector":{"matchLabels":{"app":"vllm"}},"targetPorts":[{"number":8000}]}})");
  EXPECT_TRUE(p.has_value()) << p.error();
  return *p;
}

class SliceReconcilerTest : public ::testing::Test {
 protected:
  RecordingSink sink_;
  SliceReconciler rec_{Pool(), "vllm", {"m"}, &sink_};
};

TEST_F(SliceReconcilerTest, AListJoinsReadyEndpointsOnThePoolsPortOnly) {
  auto rv = rec_.ApplyList(List({Slice("vllm-abc", {{"vllm-a", "10.2.0.11"}, {"vllm-b", "10.2.0.12", "false", "false"}}),
                                 Slice("other-xyz", {{"web-a", "10.2.0.99"}}, "web")}));
  ASSERT_TRUE(rv.has_value()) << rv.error();
  EXPECT_EQ(*rv, "1000");
  // Not 5557 (the slice lists it, the pool does not target it); not the other Service's.
  EXPECT_EQ(sink_.Take(), std::vector<std::string>{"join vllm-a:8000 http://10.2.0.11:8000"});
  EXPECT_EQ(rec_.Members(), std::vector<std::string>{"vllm-a:8000"});
}

TEST_F(SliceReconcilerTest, ReadyServingTerminatingMapToJoinDrainLeave) {
  ASSERT_TRUE(rec_.ApplyList(List({Slice("s1", {{"vllm-a", "10.2.0.11"}, {"vllm-b", "10.2.0.12"}})})));
  sink_.Take();
  // a: terminating but still serving → drained at once; b: not ready (alive) → left.
  EXPECT_EQ(rec_.ApplyEvent(Event("MODIFIED", Slice("s1", {{"vllm-a", "10.2.0.11", "false", "true", "true"},
                                                           {"vllm-b", "10.2.0.12", "false", "false", "false"}},
                                                    "vllm", "8"))),
            WatchReconciler::Event::kApplied);
  EXPECT_EQ(sink_.Take(), (std::vector<std::string>{"drain vllm-a:8000", "leave vllm-b:8000"}));
  EXPECT_EQ(rec_.resource_version(), "8");
  // A drained endpoint never rejoins; it leaves when it is removed.
  rec_.ApplyEvent(Event("MODIFIED", Slice("s1", {{"vllm-a", "10.2.0.11"}, {"vllm-b", "10.2.0.12"}})));
  EXPECT_EQ(sink_.Take(), std::vector<std::string>{"join vllm-b:8000 http://10.2.0.12:8000"});
  rec_.ApplyEvent(Event("MODIFIED", Slice("s1", {{"vllm-b", "10.2.0.12"}})));
  EXPECT_EQ(sink_.Take(), std::vector<std::string>{"leave vllm-a:8000"});
}

TEST_F(SliceReconcilerTest, UnsetReadyCountsAsReady) {
  ASSERT_TRUE(rec_.ApplyList(List({Slice("s1", {{"vllm-a", "10.2.0.11", "", "", ""}})})));
  EXPECT_EQ(sink_.Take(), std::vector<std::string>{"join vllm-a:8000 http://10.2.0.11:8000"});
}

TEST_F(SliceReconcilerTest, AnEndpointMovingBetweenSlicesStaysJoined) {
  ASSERT_TRUE(rec_.ApplyList(List({Slice("s1", {{"vllm-a", "10.2.0.11"}})})));
  sink_.Take();
  rec_.ApplyEvent(Event("ADDED", Slice("s2", {{"vllm-a", "10.2.0.11"}})));
  rec_.ApplyEvent(Event("MODIFIED", Slice("s1", {})));
  EXPECT_TRUE(sink_.Take().empty());
  rec_.ApplyEvent(Event("DELETED", Slice("s2", {{"vllm-a", "10.2.0.11"}})));
  EXPECT_EQ(sink_.Take(), std::vector<std::string>{"leave vllm-a:8000"});
}

TEST_F(SliceReconcilerTest, ANewAddressIsANewWorker) {
  ASSERT_TRUE(rec_.ApplyList(List({Slice("s1", {{"vllm-a", "10.2.0.11"}})})));
  sink_.Take();
  rec_.ApplyEvent(Event("MODIFIED", Slice("s1", {{"vllm-a", "10.2.0.21"}})));
  EXPECT_EQ(sink_.Take(), (std::vector<std::string>{"leave vllm-a:8000", "join vllm-a:8000 http://10.2.0.21:8000"}));
}

TEST_F(SliceReconcilerTest, ARelistIsTheTruthBookmarksAndErrorsChangeNoMember) {
  ASSERT_TRUE(rec_.ApplyList(List({Slice("s1", {{"vllm-a", "10.2.0.11"}}), Slice("s2", {{"vllm-c", "10.2.0.13"}})})));
  sink_.Take();
  EXPECT_EQ(rec_.ApplyEvent(R"({"type":"BOOKMARK","object":{"kind":"EndpointSlice","metadata":{"resourceVersion":"1100"}}})"),
            WatchReconciler::Event::kBookmark);
  EXPECT_EQ(rec_.resource_version(), "1100");
  EXPECT_EQ(rec_.ApplyEvent(R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})"),
            WatchReconciler::Event::kGone);
  EXPECT_EQ(rec_.ApplyEvent("not json"), WatchReconciler::Event::kError);
  EXPECT_TRUE(sink_.Take().empty());
  ASSERT_TRUE(rec_.ApplyList(List({Slice("s1", {{"vllm-a", "10.2.0.11"}, {"vllm-d", "10.2.0.14"}})}, "2000")));
  EXPECT_EQ(sink_.Take(), (std::vector<std::string>{"join vllm-d:8000 http://10.2.0.14:8000", "leave vllm-c:8000"}));
  EXPECT_EQ(rec_.resource_version(), "2000");
}

// A slice has no pod spec: the joining worker's KV events come from its targetRef pod, asked
// once per join; a pod the lookup knows nothing of joins without events.
TEST(SliceReconcilerKvEvents, TheTargetPodsEventsAreAskedOncePerJoin) {
  struct SpecSink final : MembershipSink {
    std::map<std::string, std::string> events;  // worker → its KV-event endpoint
    std::expected<void, std::string> JoinWorker(fleet::WorkerSpec spec) override {
      events[spec.name] = spec.kv_events.endpoint;
      return {};
    }
    bool DrainWorker(std::string_view) override { return true; }
    bool LeaveWorker(std::string_view) override { return true; }
  } sink;
  std::vector<std::string> asked;
  SliceReconciler rec(Pool(), "vllm", {"m"}, &sink, [&asked](const std::string& pod) -> std::optional<fleet::KvEventSource> {
    asked.push_back(pod);
    if (pod != "vllm-a") return std::nullopt;
    return fleet::KvEventSource{.endpoint = "tcp://*:5557"};
  });
  ASSERT_TRUE(rec.ApplyList(List({Slice("s1", {{"vllm-a", "10.2.0.11"}, {"vllm-b", "10.2.0.12"}})})));
  EXPECT_EQ(sink.events["vllm-a:8000"], "tcp://*:5557");
  EXPECT_EQ(sink.events["vllm-b:8000"], "");
  rec.ApplyEvent(Event("MODIFIED", Slice("s1", {{"vllm-a", "10.2.0.11"}, {"vllm-b", "10.2.0.12"}}, "vllm", "9")));
  EXPECT_EQ(asked, (std::vector<std::string>{"vllm-a", "vllm-b"}));  // no change, no new lookups
}

TEST_F(SliceReconcilerTest, NotAnEndpointSliceListIsAnError) {
  EXPECT_FALSE(rec_.ApplyList(R"({"kind":"PodList","items":[]})").has_value());
  EXPECT_FALSE(rec_.ApplyList("{").has_value());
}

}  // namespace
}  // namespace kvroute::k8s
