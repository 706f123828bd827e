// ReadPodPd on Pod JSON in the API's shapes, and PoolReconciler joining a P/D pool from its
// pods' kvroute.io/* annotations (k8s/pod_pd.h). No API server runs here.
#include "k8s/pod_pd.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "k8s/pool_discovery.h"

namespace kvroute::k8s {
namespace {

std::string PodJson(const std::string& name, const std::string& ip,
                    const std::string& annotations) {
  return R"({"kind":"Pod","metadata":{"name":")" + name +
         R"(","labels":{"app":"vllm"},"annotations":{)" + annotations +
         R"(}},"status":{"podIP":")" + ip + R"(","conditions":[{"type":"Ready","status":"True"}]}})";
}

std::expected<PodPd, std::string> Read(const std::string& annotations) {
  boost::json::value pod = boost::json::parse(PodJson("p", "10.0.0.1", annotations));
  return ReadPodPd(&pod.as_object());
}

TEST(PodPd, AnnotationsGiveRoleTpGpusAndLink) {
  auto pd = Read(R"("kvroute.io/role":"decode","kvroute.io/tp":"2","kvroute.io/gpus":"4",)"
                 R"("kvroute.io/link":"roce-100g","kvroute.io/link-bytes-per-s":"1.25e10",)"
                 R"("kvroute.io/link-latency-s":"0.002")");
  ASSERT_TRUE(pd.has_value()) << pd.error();
  EXPECT_EQ(pd->role, sched::Role::kDecode);
  EXPECT_EQ(pd->tp, 2u);
  EXPECT_EQ(pd->gpus, 4u);
  EXPECT_EQ(pd->link, "roce-100g");
  EXPECT_EQ(pd->link_bytes_per_s, 1.25e10);
  EXPECT_EQ(pd->link_latency_s, 0.002);
  fleet::WorkerSpec spec;
  pd->ApplyTo(&spec);
  EXPECT_EQ(spec.role, sched::Role::kDecode);
  EXPECT_EQ(spec.tp, 2u);
  EXPECT_EQ(spec.gpus, 4u);
  EXPECT_EQ(spec.link, "roce-100g");
  EXPECT_EQ(spec.link_bytes_per_s, 1.25e10);
}

TEST(PodPd, NoAnnotationsMeansMixedAndTheProfilesFigures) {
  auto pd = Read("");
  ASSERT_TRUE(pd.has_value());
  EXPECT_EQ(*pd, PodPd{});
  EXPECT_EQ(ReadPodPd(nullptr).value(), PodPd{});
  EXPECT_EQ(Read(R"("kvroute.io/role":"prefill")")->role, sched::Role::kPrefill);
  EXPECT_EQ(Read(R"("kvroute.io/role":"mixed")")->role, sched::Role::kMixed);
}

TEST(PodPd, MalformedValuesAreErrorsNamingTheAnnotation) {
  EXPECT_EQ(Read(R"("kvroute.io/role":"both")").error(),
            "kvroute.io/role: 'both' is not one of mixed, prefill, decode");
  EXPECT_EQ(Read(R"("kvroute.io/tp":"0")").error(),
            "kvroute.io/tp: '0' is not an integer in 1..1024");
  EXPECT_EQ(Read(R"("kvroute.io/tp":"4x")").error(),
            "kvroute.io/tp: '4x' is not an integer in 1..1024");
  EXPECT_EQ(Read(R"("kvroute.io/link-bytes-per-s":"0")").error(),
            "kvroute.io/link-bytes-per-s: '0' is not a number > 0");
  EXPECT_EQ(Read(R"("kvroute.io/link-latency-s":"-1")").error(),
            "kvroute.io/link-latency-s: '-1' is not a number >= 0");
  EXPECT_EQ(Read(R"("kvroute.io/tp":"4","kvroute.io/gpus":"2")").error(),
            "kvroute.io/gpus: 2 is fewer than kvroute.io/tp (4)");
}

// A vLLM pod: the role and TP from its own arguments, annotations winning field by field.
std::expected<PodPd, std::string> ReadWithArgs(const std::string& annotations,
                                               const std::string& args) {
  boost::json::value pod = boost::json::parse(
      R"({"kind":"Pod","metadata":{"name":"p","annotations":{)" + annotations +
      R"(}},"spec":{"containers":[{"name":"sidecar","image":"envoy","args":["--port","1"]},)"
      R"({"name":"vllm","image":"vllm/vllm-openai:v0.11.0","command":["vllm","serve"],"args":[)" +
      args + "]}]}}");
  return ReadPodPd(&pod.as_object());
}

TEST(PodPd, VllmArgumentsGiveTheRoleAndTpNoAnnotationSets) {
  const std::string consumer =
      R"("Qwen/Qwen3-32B","--tensor-parallel-size","4","--kv-transfer-config",)"
      R"("{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}")";
  auto pd = ReadWithArgs("", consumer);
  ASSERT_TRUE(pd.has_value()) << pd.error();
  EXPECT_EQ(pd->role, sched::Role::kDecode);
  EXPECT_EQ(pd->tp, 4u);
  // The = form, -tp, and kv_producer.
  pd = ReadWithArgs("", R"("-tp","2","--kv-transfer-config={\"kv_role\":\"kv_producer\"}")");
  ASSERT_TRUE(pd.has_value()) << pd.error();
  EXPECT_EQ(pd->role, sched::Role::kPrefill);
  EXPECT_EQ(pd->tp, 2u);
  EXPECT_EQ(ReadWithArgs("", R"("--kv-transfer-config={\"kv_role\":\"kv_both\"}")")->role,
            sched::Role::kMixed);
  // Annotations win field by field.
  pd = ReadWithArgs(R"("kvroute.io/role":"mixed")", consumer);
  EXPECT_EQ(pd->role, sched::Role::kMixed);
  EXPECT_EQ(pd->tp, 4u);
  pd = ReadWithArgs(R"("kvroute.io/tp":"8","kvroute.io/gpus":"8")", consumer);
  EXPECT_EQ(pd->role, sched::Role::kDecode);
  EXPECT_EQ(pd->tp, 8u);
  // What vLLM would refuse is not read; gpus below the args' TP is an error.
  EXPECT_EQ(ReadWithArgs("", R"("--tensor-parallel-size","four")")->tp, 0u);
  EXPECT_EQ(ReadWithArgs(R"("kvroute.io/gpus":"2")", consumer).error(),
            "kvroute.io/gpus: 2 is fewer than the TP of vLLM's --tensor-parallel-size (4)");
}

struct SpecSink final : MembershipSink {
  std::vector<fleet::WorkerSpec> joined;
  std::vector<std::string> calls;
  std::expected<void, std::string> JoinWorker(fleet::WorkerSpec spec) override {
    calls.push_back("join " + spec.name);
    joined.push_back(std::move(spec));
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
  void Rejected(std::string_view name, const std::string& why) override {
    calls.push_back("rejected " + std::string(name) + ": " + why);
  }
};

PoolSpec Pool() {
  auto p = ParseInferencePool(R"({"kind":"InferencePool","metadata":{"name":"pool"},
    "spec":{"selector":{"matchLabels":{"app":"vllm"}},"targetPorts":[{"number":8000}]}})");
  EXPECT_TRUE(p.has_value());
  return *p;
}

std::string Modified(const std::string& pod) {
  return R"({"type":"MODIFIED","object":)" + pod + "}";
}

TEST(PodPd, APoolJoinsItsPrefillAndDecodePodsWithTheirRoles) {
  SpecSink sink;
  PoolReconciler r(Pool(), {"m"}, &sink);
  auto rv = r.ApplyList(R"({"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[)" +
                        PodJson("p0", "10.0.0.1", R"("kvroute.io/role":"prefill","kvroute.io/tp":"4")") +
                        "," +
                        PodJson("d0", "10.0.0.2", R"("kvroute.io/role":"decode","kvroute.io/link":"ib")") +
                        "]}");
  ASSERT_TRUE(rv.has_value()) << rv.error();
  ASSERT_EQ(sink.joined.size(), 2u);
  EXPECT_EQ(sink.joined[0].name, "p0:8000");
  EXPECT_EQ(sink.joined[0].role, sched::Role::kPrefill);
  EXPECT_EQ(sink.joined[0].tp, 4u);
  EXPECT_EQ(sink.joined[1].role, sched::Role::kDecode);
  EXPECT_EQ(sink.joined[1].link, "ib");
  // The same pod again: nothing. A new role: it leaves and joins again with it.
  sink.calls.clear();
  r.ApplyEvent(Modified(PodJson("d0", "10.0.0.2", R"("kvroute.io/role":"decode","kvroute.io/link":"ib")")));
  EXPECT_TRUE(sink.calls.empty());
  r.ApplyEvent(Modified(PodJson("d0", "10.0.0.2", R"("kvroute.io/role":"mixed")")));
  EXPECT_EQ(sink.calls, (std::vector<std::string>{"leave d0:8000", "join d0:8000"}));
  EXPECT_EQ(sink.joined.back().role, sched::Role::kMixed);
  // A malformed annotation: out of the pool, named, until it is fixed.
  sink.calls.clear();
  r.ApplyEvent(Modified(PodJson("d0", "10.0.0.2", R"("kvroute.io/role":"decoder")")));
  EXPECT_EQ(sink.calls,
            (std::vector<std::string>{
                "leave d0:8000",
                "rejected d0:8000: kvroute.io/role: 'decoder' is not one of mixed, prefill, decode"}));
  EXPECT_EQ(r.Members(), std::vector<std::string>{"p0:8000"});
}

}  // namespace
}  // namespace kvroute::k8s
