// serve's P/D configuration (gateway/pd_config.h): workers[].tp/gpus/link and the pd:
// section — read, validated with errors naming the key, printed by config check.
#include "gateway/config.h"
#include "gateway/config_test_util.h"
#include "gateway/pd_config.h"
#include "sched/pd_decision.h"

#include <gtest/gtest.h>

#include <string>

namespace kvroute::gateway {
namespace {

using testing::kMinimal;

constexpr const char* kPdWorkers = R"(
workers:
  - name: p
    url: http://127.0.0.1:8001
    model: m
    role: prefill
    tp: 2
    gpus: 4
  - name: d
    url: http://127.0.0.1:8002
    model: m
    role: decode
    link: rdma
    link_bytes_per_s: 2.5e10
    link_latency_s: 0.0001
)";

TEST(GatewayConfig, PdDefaultsAreTheCostRuleInAutoMode) {
  auto c = ParseConfig(kMinimal);
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->pd.mode, "auto");
  EXPECT_EQ(c->pd.rule, "cost");
  EXPECT_EQ(c->pd.token_cap, 5000u);
  EXPECT_EQ(c->pd.non_cached_tokens, 0u);
  EXPECT_DOUBLE_EQ(c->pd.stall, 0.1);
  EXPECT_DOUBLE_EQ(c->pd.chunk_stall, 0);
  EXPECT_DOUBLE_EQ(c->pd.queue_behind, 1);
  EXPECT_EQ(c->pd.chunk_tokens, 8192u);
  EXPECT_EQ(PdOptionsOf(c->pd).slowdown.chunk_tokens, 8192u);
  EXPECT_EQ(c->pd.prefill_timeout_ms, 30000);
  EXPECT_EQ(c->workers[0].pd.tp, 0u);
  EXPECT_FALSE(c->workers[0].pd.link_bytes_per_s.has_value());
}

TEST(GatewayConfig, WorkerPdFieldsAreReadAndPrinted) {
  auto c = ParseConfig(kPdWorkers);
  ASSERT_TRUE(c.has_value()) << c.error();
  ASSERT_TRUE(Validate(*c).has_value());
  EXPECT_EQ(c->workers[0].pd.tp, 2u);
  EXPECT_EQ(c->workers[0].pd.gpus, 4u);
  EXPECT_EQ(c->workers[1].pd.link, "rdma");
  EXPECT_DOUBLE_EQ(*c->workers[1].pd.link_bytes_per_s, 2.5e10);
  EXPECT_DOUBLE_EQ(*c->workers[1].pd.link_latency_s, 1e-4);
  // The effective configuration re-parses to the same values.
  auto again = ParseConfig(EffectiveYaml(*c));
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(again->workers[0].pd.gpus, 4u);
  EXPECT_EQ(again->workers[1].pd.link, "rdma");
  EXPECT_DOUBLE_EQ(*again->workers[1].pd.link_bytes_per_s, 2.5e10);
  EXPECT_FALSE(again->workers[0].pd.link_bytes_per_s.has_value());
}

TEST(GatewayConfig, PdSectionIsReadValidatedAndPrinted) {
  auto c = ParseConfig(std::string(kPdWorkers) +
                       "pd: {mode: on, rule: dynamo_token_cap, token_cap: 0, stall: 1, "
                       "itl_slo_s: 0.05, prefill_timeout_ms: 1500, chunk_tokens: 2048, chunk_stall: 1}\n");
  ASSERT_TRUE(c.has_value()) << c.error();
  ASSERT_TRUE(Validate(*c).has_value());
  EXPECT_EQ(c->pd.mode, "on");
  EXPECT_EQ(c->pd.rule, "dynamo_token_cap");
  EXPECT_EQ(c->pd.token_cap, 0u);
  EXPECT_EQ(c->pd.prefill_timeout_ms, 1500);
  EXPECT_EQ(c->pd.chunk_tokens, 2048u);
  EXPECT_EQ(PdOptionsOf(c->pd).slowdown.chunk_tokens, 2048u);
  const std::string yaml = EffectiveYaml(*c);
  EXPECT_NE(yaml.find("rule: dynamo_token_cap"), std::string::npos) << yaml;
  auto again = ParseConfig(yaml);
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(again->pd.rule, "dynamo_token_cap");
  EXPECT_DOUBLE_EQ(again->pd.itl_slo_s, 0.05);
  EXPECT_EQ(again->pd.chunk_tokens, 2048u);
  EXPECT_DOUBLE_EQ(again->pd.chunk_stall, 1);
  EXPECT_DOUBLE_EQ(PdOptionsOf(again->pd).chunk_stall, 1);
}

TEST(GatewayConfig, PdMistakesNameTheirKey) {
  auto rule = ParseConfig(std::string(kMinimal) + "pd: {rule: fastest}\n");
  ASSERT_TRUE(rule.has_value());
  auto bad_rule = Validate(*rule);
  ASSERT_FALSE(bad_rule.has_value());
  EXPECT_NE(bad_rule.error().find("pd.rule"), std::string::npos) << bad_rule.error();
  auto mode = ParseConfig(std::string(kMinimal) + "pd: {mode: sometimes}\n");
  ASSERT_TRUE(mode.has_value());
  EXPECT_FALSE(Validate(*mode).has_value());
  auto unknown = ParseConfig(std::string(kMinimal) + "pd: {ruel: cost}\n");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().find("pd.ruel"), std::string::npos) << unknown.error();
  auto negative = ParseConfig(std::string(kMinimal) + "pd: {stall: -1}\n");
  ASSERT_FALSE(negative.has_value());
  EXPECT_NE(negative.error().find("pd.stall"), std::string::npos) << negative.error();
}

// pd.queue_behind is simulate's --pd-queue-behind: read, printed, re-read, handed to the
// decision, and refused (naming the key) when negative or not a number.
TEST(GatewayConfig, PdQueueBehindIsReadPrintedAndChecked) {
  auto c = ParseConfig(std::string(kPdWorkers) + "pd: {queue_behind: 0.25}\n");
  ASSERT_TRUE(c.has_value()) << c.error();
  ASSERT_TRUE(Validate(*c).has_value());
  EXPECT_DOUBLE_EQ(c->pd.queue_behind, 0.25);
  EXPECT_DOUBLE_EQ(PdOptionsOf(c->pd).queue_behind, 0.25);
  const std::string yaml = EffectiveYaml(*c);
  EXPECT_NE(yaml.find("queue_behind: 0.25"), std::string::npos) << yaml;
  auto again = ParseConfig(yaml);
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_DOUBLE_EQ(again->pd.queue_behind, 0.25);
  auto off = ParseConfig(std::string(kPdWorkers) + "pd: {queue_behind: 0}\n");
  ASSERT_TRUE(off.has_value()) << off.error();
  EXPECT_DOUBLE_EQ(PdOptionsOf(off->pd).queue_behind, 0);
  for (const char* bad : {"-1", ".nan", ".inf", "lots"}) {
    auto b = ParseConfig(std::string(kMinimal) + "pd: {queue_behind: " + bad + "}\n");
    ASSERT_FALSE(b.has_value()) << bad;
    EXPECT_NE(b.error().find("pd.queue_behind"), std::string::npos) << b.error();
  }
  // A value set in code past the reader is caught by Validate.
  auto coded = ParseConfig(kMinimal);
  ASSERT_TRUE(coded.has_value());
  coded->pd.queue_behind = -0.5;
  auto refused = Validate(*coded);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("pd.queue_behind"), std::string::npos) << refused.error();
}

TEST(GatewayConfig, FewerGpusThanTpIsRefused) {
  std::string yaml = kPdWorkers;
  yaml.replace(yaml.find("gpus: 4"), 7, "gpus: 1");
  auto c = ParseConfig(yaml);
  ASSERT_TRUE(c.has_value()) << c.error();
  auto ok = Validate(*c);
  ASSERT_FALSE(ok.has_value());
  EXPECT_NE(ok.error().find("workers[0].gpus"), std::string::npos) << ok.error();
}

TEST(GatewayConfig, NonPositiveLinkBandwidthIsRefused) {
  std::string yaml = kPdWorkers;
  yaml.replace(yaml.find("2.5e10"), 6, "0");
  auto c = ParseConfig(yaml);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().find("workers[1].link_bytes_per_s"), std::string::npos) << c.error();
}

}  // namespace
}  // namespace kvroute::gateway
