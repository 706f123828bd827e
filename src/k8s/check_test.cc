// The `config check --k8s` rules on small inline manifests, one behaviour per test. Pure: no
// Kubernetes API server, no Envoy (neither runs here). The project's own deploy/ manifests and
// one broken copy per rule are checked through the binary in tests/integration/k8s.
#include "k8s/check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kvroute::k8s {
namespace {

using ::testing::HasSubstr;

// A vLLM StatefulSet whose pieces the tests vary.
std::string ModelServer(const std::string& grace, const std::string& args,
                        const std::string& prestop = "sleep: {seconds: 15}",
                        const std::string& image = "vllm/vllm-openai:v0.10.1.1") {
  return "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: vllm, namespace: ns}\n"
         "spec:\n  selector: {matchLabels: {app: vllm}}\n  template:\n"
         "    metadata: {labels: {app: vllm}}\n    spec:\n" +
         (grace.empty() ? "" : "      terminationGracePeriodSeconds: " + grace + "\n") +
         "      containers:\n      - name: vllm\n        image: " + image + "\n        args: " +
         args + "\n        lifecycle: {preStop: {" + prestop + "}}\n";
}
const std::string kGoodArgs =
    R"(["--shutdown-timeout=45", '--kv-events-config={"enable_kv_cache_events": true, "endpoint": "tcp://*:5557"}'])";

std::vector<Finding> Check(const std::string& yaml, int buffer = 15) {
  auto objs = ParseManifests(yaml, "t.yaml");
  EXPECT_TRUE(objs) << objs.error();
  return objs ? CheckManifests(*objs, {.teardown_buffer_s = buffer}) : std::vector<Finding>{};
}
std::vector<Finding> Errors(const std::vector<Finding>& all, const std::string& rule) {
  std::vector<Finding> out;
  for (const auto& f : all) {
    if (f.severity == Severity::kError && f.rule == rule) out.push_back(f);
  }
  return out;
}

TEST(DrainRule, GraceCoveringPreStopShutdownAndBufferPasses) {
  EXPECT_TRUE(Errors(Check(ModelServer("75", kGoodArgs)), "drain").empty());
}

TEST(DrainRule, ShortGraceIsReportedWithTheThreeNumbers) {
  auto e = Errors(Check(ModelServer("60", kGoodArgs)), "drain");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].object, "StatefulSet/vllm");
  EXPECT_EQ(e[0].field, "spec.template.spec.terminationGracePeriodSeconds");
  EXPECT_THAT(e[0].message, HasSubstr("60 < preStop sleep 15 + --shutdown-timeout 45 + teardown buffer 15 = 75"));
}

TEST(DrainRule, UnsetGraceIsKubernetesDefaultOf30) {
  auto e = Errors(Check(ModelServer("", kGoodArgs)), "drain");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0].message, HasSubstr("30 (unset: Kubernetes' default)"));
}

TEST(DrainRule, ExecSleepAndShellFormFlagsAreRead) {
  auto yaml = ModelServer(
      "100", R"(["/bin/sh", "-c", "vllm serve m --shutdown-timeout 90 --port 8000"])",
      R"(exec: {command: ["/bin/sh", "-c", "sleep 30"]})");
  auto e = Errors(Check(yaml), "drain");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0].message, HasSubstr("preStop sleep 30 + --shutdown-timeout 90"));
}

TEST(DrainRule, VllmWithoutShutdownTimeoutIsAWarning) {
  auto all = Check(ModelServer("75", "[--port=8000]"));
  EXPECT_TRUE(Errors(all, "drain").empty());
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0].severity, Severity::kWarning);
  EXPECT_THAT(all[0].message, HasSubstr("aborts"));
}

TEST(DrainRule, KvrouteDrainTimeoutComesFromItsFlag) {
  auto e = Errors(Check("kind: Deployment\nmetadata: {name: r}\nspec:\n  template:\n    spec:\n"
                        "      terminationGracePeriodSeconds: 40\n      containers:\n"
                        "      - {name: kvroute, image: 'ghcr.io/kvroute/kvroute:0.1.0', "
                        "args: [serve, --drain-timeout=30], lifecycle: {preStop: {sleep: {seconds: 5}}}}\n"),
                  "drain");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0].message, HasSubstr("40 < preStop sleep 5 + --drain-timeout 30 + shutdown_grace_s (default) 1 + teardown buffer 15 = 51"));
}

const std::string kPool =
    "apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: pool, namespace: ns}\n"
    "spec:\n  selector: {matchLabels: {app: vllm}}\n  targetPorts: [{number: 8000}]\n"
    "  endpointPickerRef: {name: epp, port: {number: 9002}";

TEST(FailureModeRule, ExplicitFailureModePasses) {
  EXPECT_TRUE(Errors(Check(kPool + ", failureMode: FailOpen}\n"), "failure-mode").empty());
}

TEST(FailureModeRule, UnsetFailureModeSaysItMeansFailClose) {
  auto e = Errors(Check(kPool + "}\n"), "failure-mode");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].object, "InferencePool/pool");
  EXPECT_EQ(e[0].field, "spec.endpointPickerRef.failureMode");
  EXPECT_THAT(e[0].message, HasSubstr("unset means FailClose"));
}

TEST(FailureModeRule, UnknownValueIsReported) {
  auto e = Errors(Check(kPool + ", failureMode: Open}\n"), "failure-mode");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_THAT(e[0].message, HasSubstr("not one of FailClose, FailOpen"));
}

TEST(FloatingRule, PinnedTagsAndDigestsPass) {
  EXPECT_TRUE(Errors(Check(ModelServer("75", kGoodArgs)), "floating").empty());
  EXPECT_TRUE(Errors(Check(ModelServer("75", kGoodArgs, "sleep: {seconds: 15}",
                                       "vllm/vllm-openai@sha256:0123abcd")),
                     "floating").empty());
  EXPECT_TRUE(Errors(Check(ModelServer("75", kGoodArgs, "sleep: {seconds: 15}",
                                       "localhost:5000/vllm:v0.10.1")),
                     "floating").empty());
}

TEST(FloatingRule, LatestMainBareMajorAndNoTagAreReported) {
  for (const char* image : {"vllm/vllm-openai:latest", "ghcr.io/x/epp:main", "ghcr.io/x/epp:v0",
                            "vllm/vllm-openai", "localhost:5000/vllm"}) {
    auto e = Errors(Check(ModelServer("75", kGoodArgs, "sleep: {seconds: 15}", image)), "floating");
    ASSERT_EQ(e.size(), 1u) << image;
    EXPECT_EQ(e[0].field, "spec.template.spec.containers[vllm].image") << image;
  }
}

TEST(FloatingRule, ChartLabelAndHelmReleaseVersions) {
  auto e = Errors(Check("kind: Service\nmetadata: {name: s, labels: {helm.sh/chart: inferencepool-v0}}\n"
                        "---\nkind: HelmRelease\nmetadata: {name: h}\nspec: {chart: {spec: {chart: x}}}\n"
                        "---\nkind: Service\nmetadata: {name: ok, labels: {helm.sh/chart: kvroute-0.1.0}}\n"),
                  "floating");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].field, "metadata.labels.helm.sh/chart");
  EXPECT_EQ(e[1].field, "spec.chart.spec.version");
}

const std::string kPicker =
    "kind: ConfigMap\nmetadata: {name: cfg, namespace: ns}\ndata:\n  kvroute.yaml: |\n    mode: MODE\n"
    "---\nkind: Deployment\nmetadata: {name: epp, namespace: ns}\nspec:\n  template:\n    spec:\n"
    "      terminationGracePeriodSeconds: 60\n      containers:\n"
    "      - {name: kvroute, image: 'ghcr.io/kvroute/kvroute:0.1.0', args: [serve, --epp]}\n"
    "      volumes: [{name: c, configMap: {name: cfg}}]\n---\n";

std::string WithMode(const std::string& mode) {
  std::string s = kPicker;
  s.replace(s.find("MODE"), 4, mode);
  return s;
}

TEST(KvEventsRule, PreciseModeWithEventsPasses) {
  EXPECT_TRUE(Errors(Check(WithMode("precise") + ModelServer("75", kGoodArgs)), "kv-events").empty());
}

TEST(KvEventsRule, PreciseModeWithoutEventsNamesTheModelServer) {
  auto e = Errors(Check(WithMode("precise") + ModelServer("75", "[--shutdown-timeout=45]")), "kv-events");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].object, "StatefulSet/vllm");
  EXPECT_EQ(e[0].field, "spec.template.spec.containers[vllm].args");
  EXPECT_THAT(e[0].message, HasSubstr("Deployment/epp routes in precise mode"));
}

TEST(KvEventsRule, EventsExplicitlyDisabledCountAsMissing) {
  auto e = Errors(Check(WithMode("precise") +
                        ModelServer("75", R"(["--shutdown-timeout=45", '--kv-events-config={"enable_kv_cache_events": false}'])")),
                  "kv-events");
  EXPECT_EQ(e.size(), 1u);
}

TEST(KvEventsRule, ApproximateModeNeedsNoEvents) {
  EXPECT_TRUE(Errors(Check(WithMode("approximate") + ModelServer("75", "[--shutdown-timeout=45]")),
                     "kv-events").empty());
}

TEST(KvEventsRule, OnlyPodsOfTheInferencePoolAreTheTargets) {
  // The pool selects app: other; the vLLM without events is not the picker's.
  std::string pool = kPool + ", failureMode: FailClose}\n";
  pool.replace(pool.find("{app: vllm}"), 11, "{app: other}");
  auto e = Errors(Check(WithMode("precise") + pool + "\n---\n" + ModelServer("75", "[--shutdown-timeout=45]")),
                  "kv-events");
  EXPECT_TRUE(e.empty());
}

TEST(SelectorRule, PoolMatchingAPodTemplatePasses) {
  EXPECT_TRUE(Errors(Check(kPool + ", failureMode: FailClose}\n---\n" + ModelServer("75", kGoodArgs)),
                     "selector").empty());
}

TEST(SelectorRule, PoolServiceAndOwnSelectorMismatchesAreReported) {
  std::string pool = kPool + ", failureMode: FailClose}\n";
  pool.replace(pool.find("{app: vllm}"), 11, "{app: vlm}");
  std::string server = ModelServer("75", kGoodArgs);
  server.replace(server.find("{matchLabels: {app: vllm}}"), 26, "{matchLabels: {app: x}}");
  auto e = Errors(Check(pool + "---\nkind: Service\nmetadata: {name: s, namespace: ns}\n"
                               "spec: {selector: {app: vllm, tier: gpu}}\n---\n" + server),
                  "selector");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].object, "InferencePool/pool");
  EXPECT_THAT(e[0].message, HasSubstr("{app: vlm} matches no pod template in namespace 'ns'"));
  EXPECT_EQ(e[1].object, "Service/s");
  EXPECT_EQ(e[2].object, "StatefulSet/vllm");
  EXPECT_EQ(e[2].field, "spec.selector.matchLabels");
}

TEST(SelectorRule, OtherNamespacesDoNotCount) {
  std::string pool = kPool + ", failureMode: FailClose}\n";
  pool.replace(pool.find("namespace: ns"), 13, "namespace: other");
  EXPECT_EQ(Errors(Check(pool + "---\n" + ModelServer("75", kGoodArgs)), "selector").size(), 1u);
}

TEST(DrainRule, AbsurdNumbersAreIgnoredNotACrash) {
  EXPECT_NO_THROW(Check(ModelServer("75", "[--shutdown-timeout=99999999999999999999999]",
                                    R"(exec: {command: ["sleep", "99999999999999999999"]})")));
}

TEST(FormatFinding, NamesSeverityRuleObjectSourceAndField) {
  Finding f{Severity::kError, "drain", "StatefulSet/vllm", "a.yaml#2", "spec.x", "msg"};
  EXPECT_EQ(FormatFinding(f), "error [drain] StatefulSet/vllm (a.yaml#2) spec.x: msg");
}

}  // namespace
}  // namespace kvroute::k8s
