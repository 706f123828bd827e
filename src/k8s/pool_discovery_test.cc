// PoolReconciler against a recording sink, fed JSON in the Kubernetes API's shapes (PodList,
// watch events, the 410 Status). No API server runs here.
#include "k8s/pool_discovery.h"

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
};

std::string Pod(const std::string& name, const std::string& ip, bool ready, bool deleting = false,
                const std::string& app = "vllm") {
  return R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":")" + name +
         R"(","namespace":"llm","resourceVersion":"7","labels":{"app":")" + app + "\"}" +
         (deleting ? R"(,"deletionTimestamp":"2026-01-01T00:00:00Z","deletionGracePeriodSeconds":75)" : "") +
         R"(},"status":{"phase":"Running","podIP":")" + ip + R"(","conditions":[{"type":"Ready","status":")" +
         (ready ? "True" : "False") + R"("}]}})";
}
std::string Event(const std::string& type, const std::string& object) {
  return R"({"type":")" + type + R"(","object":)" + object + "}";
}

PoolSpec Pool() {
  auto p = ParseInferencePool(R"({"apiVersion":"inference.networking.k8s.io/v1","kind":"InferencePool",
    "metadata":{"name":"pool","namespace":"llm"},
    "spec":{"selector":{"matchLabels":{"app":"vllm"}},"targetPorts":[{"number":8000}],
            "endpointPickerRef":{"name":"kvroute-epp","port":{"number":9002},"failureMode":"FailOpen"}}})");
  EXPECT_TRUE(p.has_value()) << p.error();
  return *p;
}

TEST(InferencePool, ReadsSelectorPortsAndFailureMode) {
  PoolSpec p = Pool();
  EXPECT_EQ(p.selector.at("app"), "vllm");
  EXPECT_EQ(p.target_ports, std::vector<int>{8000});
  EXPECT_EQ(p.EffectiveFailureMode(), "FailOpen");
  EXPECT_EQ(p.picker_service, "kvroute-epp");
  EXPECT_EQ(p.picker_port, 9002);
}

TEST(InferencePool, UnsetFailureModeMeansFailClose) {
  auto p = ParseInferencePool(R"({"kind":"InferencePool","metadata":{"name":"p"},
    "spec":{"selector":{"matchLabels":{"app":"x"}},"targetPorts":[{"number":8000},{"number":8001}]}})");
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->failure_mode.has_value());
  EXPECT_EQ(p->EffectiveFailureMode(), "FailClose");
  EXPECT_EQ(p->target_ports.size(), 2u);
}

TEST(InferencePool, RejectsAPoolWithoutSelectorOrPorts) {
  EXPECT_FALSE(ParseInferencePool(R"({"kind":"InferencePool","spec":{"targetPorts":[{"number":1}]}})"));
  EXPECT_FALSE(ParseInferencePool(R"({"kind":"InferencePool","spec":{"selector":{"matchLabels":{"a":"b"}}}})"));
  EXPECT_FALSE(ParseInferencePool(R"({"kind":"Service"})"));
}

TEST(PoolReconciler, AListJoinsReadyPodsOnlyAndReturnsItsResourceVersion) {
  RecordingSink sink;
  PoolReconciler r(Pool(), {"m"}, &sink);
  auto rv = r.ApplyList(R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"100"},"items":[)" +
                        Pod("a", "10.0.0.1", true) + "," + Pod("b", "10.0.0.2", false) + "]}");
  ASSERT_TRUE(rv.has_value());
  EXPECT_EQ(*rv, "100");
  EXPECT_EQ(sink.calls, std::vector<std::string>{"join a:8000 http://10.0.0.1:8000"});
}

TEST(PoolReconciler, WatchEventsAddModifyDrainDelete) {
  RecordingSink sink;
  PoolReconciler r(Pool(), {"m"}, &sink);
  ASSERT_TRUE(r.ApplyList(R"({"kind":"PodList","metadata":{"resourceVersion":"1"},"items":[]})"));
  EXPECT_EQ(r.ApplyEvent(Event("ADDED", Pod("a", "", false))), PoolReconciler::Event::kApplied);  // pending: no IP
  EXPECT_EQ(r.ApplyEvent(Event("MODIFIED", Pod("a", "10.0.0.1", true))), PoolReconciler::Event::kApplied);
  r.ApplyEvent(Event("MODIFIED", Pod("a", "10.0.0.1", true)));  // no change: no call
  r.ApplyEvent(Event("MODIFIED", Pod("a", "10.0.0.1", true, /*deleting=*/true)));
  r.ApplyEvent(Event("MODIFIED", Pod("a", "10.0.0.1", false, /*deleting=*/true)));  // still draining
  r.ApplyEvent(Event("DELETED", Pod("a", "10.0.0.1", false, true)));
  EXPECT_EQ(sink.calls, (std::vector<std::string>{"join a:8000 http://10.0.0.1:8000", "drain a:8000", "leave a:8000"}));
  EXPECT_EQ(r.resource_version(), "7");
}

TEST(PoolReconciler, NotReadyLeavesAndReadyAgainJoinsANewIpRejoins) {
  RecordingSink sink;
  PoolReconciler r(Pool(), {"m"}, &sink);
  r.ApplyEvent(Event("ADDED", Pod("a", "10.0.0.1", true)));
  r.ApplyEvent(Event("MODIFIED", Pod("a", "10.0.0.1", false)));
  r.ApplyEvent(Event("MODIFIED", Pod("a", "10.0.0.9", true)));
  r.ApplyEvent(Event("MODIFIED", Pod("a", "10.0.0.9", true, false, /*app=*/"other")));  // relabelled out
  EXPECT_EQ(sink.calls, (std::vector<std::string>{"join a:8000 http://10.0.0.1:8000", "leave a:8000",
                                                  "join a:8000 http://10.0.0.9:8000", "leave a:8000"}));
}

TEST(PoolReconciler, BookmarkMovesTheResourceVersionOnly) {
  RecordingSink sink;
  PoolReconciler r(Pool(), {"m"}, &sink);
  EXPECT_EQ(r.ApplyEvent(R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12746"}}})"),
            PoolReconciler::Event::kBookmark);
  EXPECT_EQ(r.resource_version(), "12746");
  EXPECT_TRUE(sink.calls.empty());
}

TEST(PoolReconciler, Error410IsGoneOtherErrorsAreNot) {
  RecordingSink sink;
  PoolReconciler r(Pool(), {"m"}, &sink);
  EXPECT_EQ(r.ApplyEvent(R"js({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 100 (900)","reason":"Expired","code":410}})js"),
            PoolReconciler::Event::kGone);
  EXPECT_EQ(r.ApplyEvent(R"({"type":"ERROR","object":{"kind":"Status","code":500}})"), PoolReconciler::Event::kError);
  EXPECT_EQ(r.ApplyEvent("not json"), PoolReconciler::Event::kError);
}

TEST(PoolReconciler, ARelistLeavesPodsItNoLongerHas) {
  RecordingSink sink;
  PoolReconciler r(Pool(), {"m"}, &sink);
  r.ApplyList(R"({"kind":"PodList","metadata":{"resourceVersion":"1"},"items":[)" + Pod("a", "10.0.0.1", true) + "," +
              Pod("b", "10.0.0.2", true) + "]}");
  sink.calls.clear();
  r.ApplyList(R"({"kind":"PodList","metadata":{"resourceVersion":"9"},"items":[)" + Pod("b", "10.0.0.2", true) + "," +
              Pod("c", "10.0.0.3", true) + "]}");
  EXPECT_EQ(sink.calls, (std::vector<std::string>{"join c:8000 http://10.0.0.3:8000", "leave a:8000"}));
  EXPECT_EQ(r.Members(), (std::vector<std::string>{"b:8000", "c:8000"}));
}

}  // namespace
}  // namespace kvroute::k8s

#include "k8s/pool_watcher.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kvroute::k8s {
namespace {

class InClusterDefaults : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kvroute-sa-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "token") << "t0ken\n";
    std::ofstream(dir_ / "ca.crt") << "-----BEGIN CERTIFICATE-----\n";
    std::ofstream(dir_ / "namespace") << "llm\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string File(const char* name) const { return (dir_ / name).string(); }
  static const char* InPod(const char* k) {
    if (std::string_view(k) == "KUBERNETES_SERVICE_HOST") return "10.96.0.1";
    if (std::string_view(k) == "KUBERNETES_SERVICE_PORT") return "443";
    return nullptr;
  }
  static const char* Outside(const char*) { return nullptr; }
  std::filesystem::path dir_;
};

TEST_F(InClusterDefaults, AnEmptyConfigurationReadsTheServiceAddressAndTheServiceAccount) {
  PoolWatcherOptions o;
  ASSERT_TRUE(ApplyInClusterDefaults(&o, InPod, dir_.string()).has_value());
  EXPECT_EQ(o.api_url, "https://10.96.0.1:443");
  EXPECT_EQ(o.token_file, File("token"));
  EXPECT_EQ(o.ca_file, File("ca.crt"));
  EXPECT_EQ(o.namespace_name, "llm");
}

TEST_F(InClusterDefaults, EachFieldSetInTheConfigurationWins) {
  PoolWatcherOptions o{.api_url = "https://api.example:6443", .token_file = "/t", .ca_file = "/ca",
                       .namespace_name = "other"};
  ASSERT_TRUE(ApplyInClusterDefaults(&o, InPod, dir_.string()).has_value());
  EXPECT_EQ(o.api_url, "https://api.example:6443");
  EXPECT_EQ(o.token_file, "/t");
  EXPECT_EQ(o.ca_file, "/ca");
  EXPECT_EQ(o.namespace_name, "other");
}

TEST_F(InClusterDefaults, AnExplicitUrlGetsTheCaButNeverTheServiceAccountToken) {
  PoolWatcherOptions https{.api_url = "https://127.0.0.1:6443"};
  ASSERT_TRUE(ApplyInClusterDefaults(&https, Outside, dir_.string()).has_value());
  EXPECT_EQ(https.ca_file, File("ca.crt"));
  EXPECT_EQ(https.token_file, "");
  PoolWatcherOptions http{.api_url = "http://127.0.0.1:8001", .namespace_name = "llm"};
  ASSERT_TRUE(ApplyInClusterDefaults(&http, Outside, "/nonexistent").has_value());
  EXPECT_EQ(http.ca_file, "");
  EXPECT_EQ(http.token_file, "");
}

TEST_F(InClusterDefaults, WhatIsMissingIsNamed) {
  PoolWatcherOptions outside;
  auto e = ApplyInClusterDefaults(&outside, Outside, dir_.string());
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().find("KUBERNETES_SERVICE_HOST"), std::string::npos) << e.error();
  std::filesystem::remove(dir_ / "ca.crt");
  PoolWatcherOptions no_ca;
  e = ApplyInClusterDefaults(&no_ca, InPod, dir_.string());
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().find(File("ca.crt")), std::string::npos) << e.error();
  std::filesystem::remove(dir_ / "token");
  PoolWatcherOptions no_token;
  e = ApplyInClusterDefaults(&no_token, InPod, dir_.string());
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().find(File("token")), std::string::npos) << e.error();
}

TEST(PoolWatcher, RefusesHttpsWhoseCaCannotBeLoaded) {
  struct NoSink final : MembershipSink {
    std::expected<void, std::string> JoinWorker(fleet::WorkerSpec) override { return {}; }
    bool DrainWorker(std::string_view) override { return true; }
    bool LeaveWorker(std::string_view) override { return true; }
  } sink;
  auto w = PoolWatcher::Start({.api_url = "https://10.96.0.1:443", .ca_file = "/nonexistent/ca.crt",
                               .namespace_name = "llm", .pool_name = "p", .models = {"m"}},
                              &sink);
  ASSERT_FALSE(w.has_value());
  EXPECT_NE(w.error().find("ca_file /nonexistent/ca.crt: not readable"), std::string::npos) << w.error();
}

}  // namespace
}  // namespace kvroute::k8s
