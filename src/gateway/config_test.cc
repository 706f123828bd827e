#include "gateway/config.h"
#include "gateway/config_test_util.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace kvroute::gateway {
namespace {

using testing::kMinimal;

TEST(GatewayConfig, MinimalFileGetsDocumentedDefaults) {
  auto c = ParseConfig(kMinimal);
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->host, "127.0.0.1");
  EXPECT_EQ(c->port, 8080);
  EXPECT_EQ(c->mode, RoutingMode::kPrecise);
  EXPECT_EQ(c->failure_mode, FailureMode::kFailOpen);
  EXPECT_EQ(c->policy_yaml, "preset: predicted_latency");
  ASSERT_EQ(c->workers.size(), 1u);
  EXPECT_EQ(c->workers[0].models, std::vector<std::string>{"m"});
  EXPECT_EQ(c->workers[0].role, "mixed");
  EXPECT_TRUE(Validate(*c).has_value());
}

// The default lane count follows the CPUs this process may use (nginx's `worker_processes
// auto`), so it is checked on a thread restricted to one CPU and then to two.
TEST(GatewayConfig, DefaultLaneCountFollowsTheAffinityMask) {
  int result_one = 0;
  int result_two = 0;
  int cpus_seen = 0;
  std::thread probe([&] {
    cpu_set_t all;
    CPU_ZERO(&all);
    ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
    cpus_seen = CPU_COUNT(&all);
    std::vector<int> ids;
    for (int cpu = 0; cpu < CPU_SETSIZE && ids.size() < 2; ++cpu) {
      if (CPU_ISSET(cpu, &all)) ids.push_back(cpu);
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(ids[0], &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    result_one = DefaultLaneCount();
    if (ids.size() == 2) {
      CPU_SET(ids[1], &one);
      ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
      result_two = DefaultLaneCount();
    }
  });
  probe.join();
  EXPECT_EQ(result_one, 1);
  if (cpus_seen >= 2) {
    EXPECT_EQ(result_two, 2);
  }
  auto c = ParseConfig(kMinimal);
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->http_threads, std::min(cpus_seen, 64));
  EXPECT_EQ(std::max(c->http_threads, c->proxy_threads), c->http_threads);
}

TEST(GatewayConfig, UnknownTopLevelKeyIsNamed) {
  auto c = ParseConfig("workerz: []\n");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error(), "workerz: unknown key");
}

TEST(GatewayConfig, UnknownWorkerKeyNamesItsPath) {
  auto c = ParseConfig(R"(
workers:
  - name: a
    url: http://127.0.0.1:8001
    model: m
  - name: b
    url: http://127.0.0.1:8002
    modle: m
)");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error(), "workers[1].modle: unknown key");
}

TEST(GatewayConfig, WrongTypeNamesTheKey) {
  auto c = ParseConfig("listen: {port: eighty}\n");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error(), "listen.port: must be a number");
}

TEST(GatewayConfig, OutOfRangePortIsRefused) {
  auto c = ParseConfig("listen: {port: 70000}\n");
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().find("listen.port"), std::string::npos);
}

TEST(GatewayConfig, UnknownFailureModeListsTheChoices) {
  auto c = ParseConfig("failure_mode: maybe\n");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error(), "failure_mode: 'maybe' is not one of fail_open, fail_close");
}

TEST(GatewayConfig, PresetNameBecomesPresetYaml) {
  auto c = ParseConfig(std::string(kMinimal) + "scheduler: {policy: least_load}\n");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->policy_yaml, "preset: least_load");
  EXPECT_TRUE(Validate(*c).has_value());
}

TEST(GatewayConfig, BadPolicyIsReportedUnderSchedulerPolicy) {
  auto c = ParseConfig(std::string(kMinimal) + "scheduler: {policy: {preset: nope}}\n");
  ASSERT_TRUE(c.has_value()) << c.error();
  auto ok = Validate(*c);
  ASSERT_FALSE(ok.has_value());
  EXPECT_TRUE(ok.error().starts_with("scheduler.policy.")) << ok.error();
}

TEST(GatewayConfig, NoWorkersFailsValidation) {
  auto c = ParseConfig("mode: approximate\n");
  ASSERT_TRUE(c.has_value());
  auto ok = Validate(*c);
  ASSERT_FALSE(ok.has_value());
  EXPECT_EQ(ok.error(), "workers: at least one worker is required (or discovery.etcd, discovery.kubernetes)");
}

TEST(GatewayConfig, EtcdDiscoveryAloneIsAFleetAndIsKeptByEffectiveYaml) {
  auto c = ParseConfig(
      "discovery: {etcd: {endpoints: [\"http://127.0.0.1:2379\", \"10.0.0.2:2379\"], "
      "prefix: /x/}}\n");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_TRUE(Validate(*c).has_value());
  EXPECT_EQ(c->etcd.endpoints.size(), 2u);
  EXPECT_EQ(c->etcd.prefix, "/x/");
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error() << "\n" << EffectiveYaml(*c);
  EXPECT_EQ(again->etcd.endpoints, c->etcd.endpoints);
  EXPECT_EQ(again->etcd.prefix, "/x/");
}

TEST(GatewayConfig, KubernetesDiscoveryAloneIsAFleetAndBadValuesAreNamed) {
  auto c = ParseConfig(
      "discovery: {kubernetes: {pool: qwen-pool, namespace: llm, "
      "api_url: 'http://127.0.0.1:8001', models: [m]}}\n");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_TRUE(Validate(*c).has_value());
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error() << "\n" << EffectiveYaml(*c);
  EXPECT_EQ(again->kubernetes.pool, "qwen-pool");
  EXPECT_EQ(again->kubernetes.namespace_name, "llm");
  EXPECT_EQ(again->kubernetes.models, std::vector<std::string>{"m"});
  ApplyOverrides(ConfigOverrides{.inference_pool = "other"}, &*c);
  EXPECT_EQ(c->kubernetes.pool, "other");
  c->kubernetes.api_url = "10.0.0.1:443";
  EXPECT_TRUE(Validate(*c).error().starts_with("discovery.kubernetes.api_url: '10.0.0.1:443' is not http(s)://host:port"))
      << Validate(*c).error();
  c->kubernetes.api_url = "http://127.0.0.1:8001";
  c->kubernetes.models.clear();
  EXPECT_EQ(Validate(*c).error(), "discovery.kubernetes.models: at least one model name");
  auto unknown = ParseConfig("discovery: {kubernetes: {poll: x}}\n");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().find("discovery.kubernetes.poll"), std::string::npos) << unknown.error();
}

TEST(GatewayConfig, KubernetesDiscoveryInAPodNeedsOnlyThePoolAndTheModels) {
  // api_url, token_file, ca_file and namespace default to the in-cluster values at start
  // (k8s::ApplyInClusterDefaults), so validation accepts them empty; set, they round-trip.
  auto in_pod = ParseConfig("discovery: {kubernetes: {pool: qwen-pool, models: [m]}}\n");
  ASSERT_TRUE(in_pod.has_value()) << in_pod.error();
  EXPECT_TRUE(Validate(*in_pod).has_value()) << Validate(*in_pod).error();
  auto tls = ParseConfig(
      "discovery: {kubernetes: {pool: p, api_url: 'https://10.96.0.1:443', ca_file: /ca.crt, "
      "token_file: /t, models: [m]}}\n");
  ASSERT_TRUE(tls.has_value()) << tls.error();
  EXPECT_TRUE(Validate(*tls).has_value()) << Validate(*tls).error();
  auto again = ParseConfig(EffectiveYaml(*tls));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(again->kubernetes.ca_file, "/ca.crt");
  EXPECT_EQ(again->kubernetes.api_url, "https://10.96.0.1:443");
}

TEST(GatewayConfig, KubernetesDiscoveryFromEndpointSlicesNeedsTheService) {
  auto c = ParseConfig("discovery: {kubernetes: {pool: p, models: [m], source: endpointslices}}\n");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(Validate(*c).error(), "discovery.kubernetes.service: required when source is endpointslices");
  c->kubernetes.service = "vllm";
  EXPECT_TRUE(Validate(*c).has_value()) << Validate(*c).error();
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(again->kubernetes.source, "endpointslices");
  EXPECT_EQ(again->kubernetes.service, "vllm");
  c->kubernetes.source = "endpoints";
  EXPECT_EQ(Validate(*c).error(), "discovery.kubernetes.source: 'endpoints' is not one of pods, endpointslices");
}

TEST(GatewayConfig, EppObjectivesAndSaturationRoundTripAndBadValuesAreNamed) {
  auto c = ParseConfig(std::string(kMinimal) +
                       "epp: {objectives: {batch: -1, chat: 10}, "
                       "saturation: {queue_depth: 3, kv_usage: 0.9, metrics_max_age_s: 1.5}}\n");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->epp.objectives, (std::map<std::string, int>{{"batch", -1}, {"chat", 10}}));
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error() << "\n" << EffectiveYaml(*c);
  EXPECT_EQ(again->epp.objectives, c->epp.objectives);
  EXPECT_EQ(again->epp.saturation_queue_depth, 3);
  EXPECT_DOUBLE_EQ(again->epp.saturation_kv_usage, 0.9);
  EXPECT_DOUBLE_EQ(again->epp.saturation_metrics_max_age_s, 1.5);
  auto bad = ParseConfig(std::string(kMinimal) + "epp: {objectives: {batch: low}}\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error(), "epp.objectives.batch: must be an integer priority");
  auto range = ParseConfig(std::string(kMinimal) + "epp: {saturation: {kv_usage: 2}}\n");
  ASSERT_FALSE(range.has_value());
  EXPECT_NE(range.error().find("epp.saturation.kv_usage"), std::string::npos) << range.error();
}

TEST(GatewayConfig, EtcdFlagsOverrideTheFileAndBadValuesAreNamed) {
  auto c = ParseConfig(std::string(kMinimal));
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->etcd.endpoints.empty());
  ApplyOverrides(ConfigOverrides{.etcd = "http://a:1,http://b:2", .etcd_prefix = "/p/"}, &*c);
  EXPECT_EQ(c->etcd.endpoints, (std::vector<std::string>{"http://a:1", "http://b:2"}));
  EXPECT_EQ(c->etcd.prefix, "/p/");
  EXPECT_TRUE(Validate(*c).has_value());
  c->etcd.endpoints = {"http://a:1/path"};
  EXPECT_EQ(Validate(*c).error(), "discovery.etcd.endpoints: 'http://a:1/path' is not http://host:port");
  auto unknown = ParseConfig("discovery: {etcd: {endpoint: x}}\n");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().find("discovery.etcd.endpoint"), std::string::npos) << unknown.error();
}

TEST(GatewayConfig, DuplicateWorkerNamesAreRefused) {
  auto c = ParseConfig(R"(
workers:
  - {name: a, url: "http://127.0.0.1:1", model: m}
  - {name: a, url: "http://127.0.0.1:2", model: m}
)");
  ASSERT_TRUE(c.has_value());
  auto ok = Validate(*c);
  ASSERT_FALSE(ok.has_value());
  EXPECT_EQ(ok.error(), "workers[1].name: duplicate 'a'");
}

TEST(GatewayConfig, BadWorkerUrlIsRefused) {
  auto c = ParseConfig("workers: [{name: a, url: 'ftp://x', model: m}]\n");
  ASSERT_TRUE(c.has_value());
  auto ok = Validate(*c);
  ASSERT_FALSE(ok.has_value());
  EXPECT_TRUE(ok.error().starts_with("workers[0].url: ")) << ok.error();
}

TEST(GatewayConfig, HfTokenizerNeedsAModelDir) {
  auto c = ParseConfig(std::string(kMinimal) + "tokenizer: {kind: hf}\n");
  ASSERT_TRUE(c.has_value());
  auto ok = Validate(*c);
  ASSERT_FALSE(ok.has_value());
  EXPECT_EQ(ok.error(), "tokenizer.model_dir: required when tokenizer.kind is hf");
}

TEST(GatewayConfig, ModelDirAloneSelectsTheHfTokenizer) {
  auto c = ParseConfig(std::string(kMinimal) + "tokenizer: {model_dir: /models/q}\n");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->tokenizer.kind, "hf");
}

TEST(GatewayConfig, EffectiveYamlParsesBackToTheSameSettings) {
  auto c = ParseConfig(std::string(kMinimal) + R"(
mode: approximate
failure_mode: fail_close
scheduler: {policy: dynamo_cost, seed: 7, itl_slo_s: 0.033}
timeouts: {connect_ms: 100, first_byte_ms: 200, idle_ms: 300}
limits: {max_body_bytes: 2048, max_attempts: 2, max_migrations: 3}
drain_timeout_s: 4.5
debug: {fault: schedule_error}
)");
  ASSERT_TRUE(c.has_value()) << c.error();
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error() << "\n" << EffectiveYaml(*c);
  EXPECT_EQ(EffectiveYaml(*again), EffectiveYaml(*c));
  EXPECT_EQ(again->mode, RoutingMode::kApproximate);
  EXPECT_EQ(again->failure_mode, FailureMode::kFailClose);
  EXPECT_EQ(again->scheduler_seed, 7u);
  EXPECT_DOUBLE_EQ(again->itl_slo_s, 0.033);
  EXPECT_EQ(again->timeouts.first_byte_ms, 200);
  EXPECT_EQ(again->limits.max_attempts, 2);
  EXPECT_EQ(again->limits.max_migrations, 3);
  EXPECT_DOUBLE_EQ(again->drain_timeout_s, 4.5);
  EXPECT_EQ(again->debug_fault, "schedule_error");
}

TEST(GatewayConfig, MaxMigrationsDefaultsToOneAndIsBounded) {
  auto c = ParseConfig(std::string(kMinimal));
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->limits.max_migrations, 1);
  EXPECT_NE(EffectiveYaml(*c).find("max_migrations: 1"), std::string::npos);
  EXPECT_TRUE(ParseConfig(std::string(kMinimal) + "limits: {max_migrations: 0}\n").has_value());
  auto bad = ParseConfig(std::string(kMinimal) + "limits: {max_migrations: -1}\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().find("max_migrations"), std::string::npos) << bad.error();
  EXPECT_FALSE(ParseConfig(std::string(kMinimal) + "limits: {max_migrations: 17}\n").has_value());
}

TEST(GatewayConfig, ImagesAndTheParityProbeAreReadAndKeptByEffectiveYaml) {
  auto c = ParseConfig(std::string(kMinimal) + R"(
images: {placeholder: "<|image_pad|>", tokens_per_image: 256, token_id: 151655, set_uuid: false}
parity_probe: false
parity_probe_timeout_s: 1.5
)");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->images.placeholder, "<|image_pad|>");
  EXPECT_EQ(c->images.tokens_per_image, 256u);
  EXPECT_EQ(c->images.token_id, 151655);
  EXPECT_FALSE(c->images.set_uuid);
  EXPECT_FALSE(c->parity_probe);
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(EffectiveYaml(*again), EffectiveYaml(*c));
  EXPECT_DOUBLE_EQ(again->parity_probe_timeout_s, 1.5);
  auto bad = ParseConfig(std::string(kMinimal) + "images: {tokens: 3}\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().find("images.tokens: unknown key"), std::string::npos) << bad.error();
  EXPECT_FALSE(ParseConfig(std::string(kMinimal) + "parity_probe: maybe\n").has_value());
}

TEST(GatewayConfig, EppIsOffByDefaultReadFromYamlAndEnabledByTheFlag) {
  auto c = ParseConfig(kMinimal);
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_FALSE(c->epp.enabled);
  EXPECT_EQ(c->epp.address, "0.0.0.0:9002");
  auto y = ParseConfig(std::string(kMinimal) + "epp: {enabled: true, address: \"127.0.0.1:9100\"}\n");
  ASSERT_TRUE(y.has_value()) << y.error();
  EXPECT_TRUE(y->epp.enabled);
  EXPECT_EQ(y->epp.address, "127.0.0.1:9100");
  auto again = ParseConfig(EffectiveYaml(*y));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(again->epp.address, "127.0.0.1:9100");
  EXPECT_TRUE(again->epp.enabled);
  // --epp without a value: on, at the default address; with one: that address.
  ConfigOverrides bare{.epp_address = std::string()};
  ApplyOverrides(bare, &*c);
  EXPECT_TRUE(c->epp.enabled);
  EXPECT_EQ(c->epp.address, "0.0.0.0:9002");
  ConfigOverrides at{.epp_address = std::string("127.0.0.1:0")};
  ApplyOverrides(at, &*c);
  EXPECT_EQ(c->epp.address, "127.0.0.1:0");
  auto bad = ParseConfig(std::string(kMinimal) + "epp: {enabled: true, address: nowhere}\n");
  ASSERT_TRUE(bad.has_value()) << bad.error();
  auto refused = Validate(*bad);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("epp.address"), std::string::npos) << refused.error();
  EXPECT_FALSE(ParseConfig(std::string(kMinimal) + "epp: {port: 1}\n").has_value());
}

TEST(GatewayConfig, CpuLoadBandwidthIsReadAndKeptByEffectiveYaml) {
  auto c = ParseConfig(R"(
workers:
  - {name: a, url: "http://127.0.0.1:8001", model: m, cpu_load_bytes_per_s: 5.0e9}
  - {name: b, url: "http://127.0.0.1:8002", model: m}
)");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_DOUBLE_EQ(c->workers[0].cpu_load_bytes_per_s, 5e9);
  EXPECT_DOUBLE_EQ(c->workers[1].cpu_load_bytes_per_s, 0);  // 0: the engine model's
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_DOUBLE_EQ(again->workers[0].cpu_load_bytes_per_s, 5e9);
}

TEST(GatewayConfig, NegativeCpuLoadBandwidthIsRefused) {
  auto c = ParseConfig(R"(
workers: [{name: a, url: "http://127.0.0.1:8001", model: m, cpu_load_bytes_per_s: -1}]
)");
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().find("workers[0].cpu_load_bytes_per_s"), std::string::npos) << c.error();
}

TEST(GatewayConfig, ProfileSpeedupIsReadDefaultsToOneAndIsKept) {
  auto c = ParseConfig(R"(
workers:
  - {name: a, url: "http://127.0.0.1:8001", model: m, profile_speedup: 10}
  - {name: b, url: "http://127.0.0.1:8002", model: m}
)");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_DOUBLE_EQ(c->workers[0].profile_speedup, 10);
  EXPECT_DOUBLE_EQ(c->workers[1].profile_speedup, 1);  // a real engine
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_DOUBLE_EQ(again->workers[0].profile_speedup, 10);
}

TEST(GatewayConfig, ZeroProfileSpeedupIsRefused) {
  auto c = ParseConfig(R"(
workers: [{name: a, url: "http://127.0.0.1:8001", model: m, profile_speedup: 0}]
)");
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().find("workers[0].profile_speedup"), std::string::npos) << c.error();
}

TEST(GatewayConfig, EffectiveYamlRedactsApiKeys) {
  auto c = ParseConfig(std::string(kMinimal) + "api_keys: [s3cret]\n");
  ASSERT_TRUE(c.has_value());
  std::string yaml = EffectiveYaml(*c);
  EXPECT_EQ(yaml.find("s3cret"), std::string::npos);
  EXPECT_NE(yaml.find("<redacted>"), std::string::npos);
}

TEST(GatewayConfig, InvalidYamlIsAnErrorNotAnException) {
  auto c = ParseConfig("workers: [\n");
  ASSERT_FALSE(c.has_value());
  EXPECT_TRUE(c.error().starts_with("invalid YAML")) << c.error();
}

TEST(GatewayConfig, ShutdownSurroundingsAreReadAndKeptByEffectiveYaml) {
  auto c = ParseConfig(std::string(kMinimal) + "termination_grace_s: 45\nbalancer_notice_s: 3\n");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_DOUBLE_EQ(c->termination_grace_s, 45);
  EXPECT_DOUBLE_EQ(c->balancer_notice_s, 3);
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_DOUBLE_EQ(again->termination_grace_s, 45);
  EXPECT_DOUBLE_EQ(again->balancer_notice_s, 3);
  EXPECT_FALSE(ParseConfig(std::string(kMinimal) + "balancer_notice_s: -1\n").has_value());
}

TEST(GatewayConfig, ReplicaSiblingsAreReadCheckedAndKeptByEffectiveYaml) {
  auto c = ParseConfig(std::string(kMinimal) +
                       "replicas: {warm_from: ['http://127.0.0.1:9001'], warm_timeout_s: 1.5, "
                       "warm_keep_s: 0}\n");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->replicas.warm_from, std::vector<std::string>{"http://127.0.0.1:9001"});
  EXPECT_DOUBLE_EQ(c->replicas.warm_timeout_s, 1.5);
  EXPECT_DOUBLE_EQ(c->replicas.warm_keep_s, 0);
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(again->replicas.warm_from, c->replicas.warm_from);
  EXPECT_DOUBLE_EQ(again->replicas.warm_keep_s, 0);
  EXPECT_FALSE(ParseConfig(std::string(kMinimal) + "replicas: {warm_keep_s: -1}\n").has_value());
  auto bad = ParseConfig(std::string(kMinimal) + "replicas: {warm_from: ['http://h:1/x']}\n");
  ASSERT_TRUE(bad.has_value());
  EXPECT_FALSE(Validate(*bad).has_value());
  EXPECT_FALSE(ParseConfig(std::string(kMinimal) + "replicas: {peers: []}\n").has_value());
}

TEST(GatewayConfig, ReplicasInEtcdNeedEtcdAndAnAddressSiblingsCanReach) {
  auto alone = ParseConfig(std::string(kMinimal) + "replicas: {etcd_prefix: /r/}\n");
  ASSERT_TRUE(alone.has_value()) << alone.error();
  EXPECT_FALSE(Validate(*alone).has_value());  // no discovery.etcd
  const std::string with_etcd = std::string(kMinimal) +
                                "discovery: {etcd: {endpoints: ['http://127.0.0.1:2379']}}\n";
  auto wildcard = ParseConfig("listen: {host: 0.0.0.0}\n" + with_etcd +
                              "replicas: {etcd_prefix: /r/}\n");
  ASSERT_TRUE(wildcard.has_value()) << wildcard.error();
  EXPECT_FALSE(Validate(*wildcard).has_value());
  auto named = ParseConfig("listen: {host: 0.0.0.0}\n" + with_etcd +
                           "replicas: {etcd_prefix: /r/, advertise_url: 'http://10.0.0.5:8080'}\n");
  ASSERT_TRUE(named.has_value()) << named.error();
  EXPECT_TRUE(Validate(*named).has_value());
  auto again = ParseConfig(EffectiveYaml(*named));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(again->replicas.etcd_prefix, "/r/");
  EXPECT_EQ(again->replicas.advertise_url, "http://10.0.0.5:8080");
}

TEST(ConfigTest, ReplicaDeltaSettingsParseValidateAndRoundTrip) {
  auto defaults = ParseConfig(std::string(kMinimal));
  ASSERT_TRUE(defaults.has_value()) << defaults.error();
  EXPECT_TRUE(defaults->replicas.share_bookings);
  EXPECT_FALSE(defaults->replicas.HasSiblings());  // no siblings: no delta stream
  auto set = ParseConfig(std::string(kMinimal) +
                         "replicas: {warm_from: ['http://127.0.0.1:9'], share_bookings: false, "
                         "delta_flush_ms: 5, remote_booking_ttl_s: 60}\n");
  ASSERT_TRUE(set.has_value()) << set.error();
  EXPECT_TRUE(set->replicas.HasSiblings());
  auto again = ParseConfig(EffectiveYaml(*set));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_FALSE(again->replicas.share_bookings);
  EXPECT_EQ(again->replicas.delta_flush_ms, 5);
  EXPECT_EQ(again->replicas.remote_booking_ttl_s, 60);
  EXPECT_FALSE(ParseConfig(std::string(kMinimal) + "replicas: {delta_flush_ms: 0}\n"));
  EXPECT_FALSE(ParseConfig(std::string(kMinimal) + "replicas: {remote_booking_ttl_s: 0}\n"));
}

}  // namespace
}  // namespace kvroute::gateway
