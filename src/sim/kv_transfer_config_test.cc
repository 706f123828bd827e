#include "sim/kv_transfer_config.h"

#include <gtest/gtest.h>

namespace kvroute::sim {
namespace {

TEST(KvTransferConfigTest, ReadsVllmsNixlLaunchJson) {
  auto c = ParseKvTransferConfig(R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->role, KvRole::kBoth);
  EXPECT_TRUE(c->CanProduce());
  EXPECT_TRUE(c->CanConsume());
  EXPECT_TRUE(c->engine_id.empty());
}

TEST(KvTransferConfigTest, RolesAndEngineIdAndExtraKeys) {
  auto p = ParseKvTransferConfig(
      R"({"kv_connector":"NixlConnector","kv_role":"kv_producer","engine_id":"e1",
          "kv_connector_extra_config":{"backends":["UCX"]},"kv_buffer_device":"cuda"})");
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_EQ(p->engine_id, "e1");
  EXPECT_TRUE(p->CanProduce());
  EXPECT_FALSE(p->CanConsume());
  auto c = ParseKvTransferConfig(R"({"kv_connector":"NixlConnector","kv_role":"kv_consumer"})");
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->CanProduce());
  EXPECT_EQ(KvRoleName(c->role), "kv_consumer");
}

TEST(KvTransferConfigTest, RefusesWhatIsNotSimulatedOrMalformed) {
  for (const char* bad : {
           R"({"kv_connector":"MooncakeConnector","kv_role":"kv_both"})",
           R"({"kv_connector":"NixlConnector"})",
           R"({"kv_connector":"NixlConnector","kv_role":"both"})",
           R"({"kv_role":"kv_both"})",
           R"({"kv_connector":7,"kv_role":"kv_both"})",
           R"([1,2])",
           R"({not json)",
       }) {
    auto c = ParseKvTransferConfig(bad);
    EXPECT_FALSE(c.has_value()) << bad;
    if (!c) {
      EXPECT_NE(c.error().find("--kv-transfer-config"), std::string::npos) << c.error();
    }
  }
}

TEST(KvEventsConfigTest, ReadsVllmsKvEventsJson) {
  KvEventsSettings defaults{.enabled = true, .endpoint = "tcp://*:5557"};
  auto e = ParseKvEventsConfig(
      R"({"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:6000",
          "replay_endpoint":"tcp://*:6001","topic":"kv@1@m","buffer_steps":50,"hwm":10})",
      defaults);
  ASSERT_TRUE(e.has_value()) << e.error();
  EXPECT_TRUE(e->enabled);
  EXPECT_EQ(e->endpoint, "tcp://*:6000");
  EXPECT_EQ(e->replay_endpoint, "tcp://*:6001");
  EXPECT_EQ(e->topic, "kv@1@m");
  EXPECT_EQ(e->buffer_steps, 50u);
}

TEST(KvEventsConfigTest, EventsAreOffUnlessEnabledAndNotNull) {
  KvEventsSettings defaults{.enabled = true, .endpoint = "tcp://*:5557"};
  auto absent = ParseKvEventsConfig(R"({"topic":"t"})", defaults);
  ASSERT_TRUE(absent.has_value());
  EXPECT_FALSE(absent->enabled);  // vLLM's default
  EXPECT_EQ(absent->endpoint, "tcp://*:5557");
  auto null_pub = ParseKvEventsConfig(R"({"enable_kv_cache_events":true,"publisher":"null"})",
                                      defaults);
  ASSERT_TRUE(null_pub.has_value());
  EXPECT_FALSE(null_pub->enabled);
  EXPECT_FALSE(ParseKvEventsConfig(R"({"enable_kv_cache_events":"yes"})", defaults));
  EXPECT_FALSE(ParseKvEventsConfig(R"({"publisher":"kafka"})", defaults));
  EXPECT_FALSE(ParseKvEventsConfig(R"({"buffer_steps":0})", defaults));
}

}  // namespace
}  // namespace kvroute::sim
