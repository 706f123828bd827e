// PodKvEvents on Pod JSON in the API's shapes: annotations, vLLM's --kv-events-config in both
// flag forms, and the cases that must give no endpoint.
#include "k8s/pod_kv_events.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvroute::k8s {
namespace {

std::optional<fleet::KvEventSource> Read(const std::string& annotations, const std::string& args) {
  boost::json::value pod = boost::json::parse(
      R"({"kind":"Pod","metadata":{"name":"vllm-a","annotations":{)" + annotations +
      R"(}},"spec":{"containers":[{"name":"sidecar","image":"envoy"},{"name":"vllm","image":"vllm/vllm-openai:v0.11.0","args":[)" +
      args + "]}]}}");
  return PodKvEvents(&pod.as_object());
}

TEST(PodKvEvents, AnnotationsNameThePortsTheEngineBinds) {
  auto e = Read(R"("kvroute.io/kv-events-port":"5557","kvroute.io/kv-events-replay-port":"5558",)"
                R"("kvroute.io/kv-events-topic":"kv")",
                "");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->endpoint, "tcp://*:5557");
  EXPECT_EQ(e->replay_endpoint, "tcp://*:5558");
  EXPECT_EQ(e->topic, "kv");
}

TEST(PodKvEvents, VllmKvEventsConfigInEitherFlagForm) {
  const std::string config =
      R"({\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", \"endpoint\": \"tcp://*:6000\", )"
      R"(\"replay_endpoint\": \"tcp://*:6001\", \"topic\": \"t\"})";
  for (const std::string& args : {R"("--model=m","--kv-events-config=)" + config + "\"",
                                  R"("--kv-events-config",")" + config + "\""}) {
    auto e = Read("", args);
    ASSERT_TRUE(e.has_value()) << args;
    EXPECT_EQ(e->endpoint, "tcp://*:6000");
    EXPECT_EQ(e->replay_endpoint, "tcp://*:6001");
    EXPECT_EQ(e->topic, "t");
  }
  auto defaulted = Read("", R"("--kv_events_config={\"enable_kv_cache_events\": true}")");
  ASSERT_TRUE(defaulted.has_value());
  EXPECT_EQ(defaulted->endpoint, "tcp://*:5557");
  EXPECT_EQ(defaulted->replay_endpoint, "");
}

TEST(PodKvEvents, TheAnnotationWinsOverTheArguments) {
  auto e = Read(R"("kvroute.io/kv-events-port":"7000")",
                R"("--kv-events-config={\"enable_kv_cache_events\": true, \"endpoint\": \"tcp://*:6000\"}")");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->endpoint, "tcp://*:7000");
}

TEST(PodKvEvents, NoEndpointWhenDisabledNullConnectingOrMalformed) {
  EXPECT_FALSE(Read("", "").has_value());
  EXPECT_FALSE(Read("", R"("--kv-events-config={\"enable_kv_cache_events\": false}")").has_value());
  EXPECT_FALSE(Read("", R"("--kv-events-config={\"enable_kv_cache_events\": true, \"publisher\": \"null\"}")")
                   .has_value());
  // The engine connects out to a central indexer: nothing to subscribe to per pod.
  EXPECT_FALSE(Read("", R"("--kv-events-config={\"enable_kv_cache_events\": true, \"endpoint\": \"tcp://indexer:5557\"}")")
                   .has_value());
  EXPECT_FALSE(Read("", R"("--kv-events-config={not json")").has_value());
  EXPECT_FALSE(Read(R"("kvroute.io/kv-events-port":"http")", "").has_value());
  EXPECT_FALSE(Read(R"("kvroute.io/kv-events-port":"70000")", "").has_value());
}

}  // namespace
}  // namespace kvroute::k8s
