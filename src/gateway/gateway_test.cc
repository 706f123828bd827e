// Gateway lifecycle without model servers: Create validates and loads the tokenizer; Start
// binds an OS-chosen port even when no worker answers (block size falls back to 16); Drain
// returns with nothing in flight.
#include "gateway/gateway.h"

#include <gtest/gtest.h>

#include "net/test_client.h"
#include "tokenize/hf_tokenizer.h"

namespace kvroute::gateway {
namespace {

GatewayConfig DeadWorkerConfig() {
  GatewayConfig c;
  c.port = 0;
  c.shutdown_grace_s = 0;
  c.drain_timeout_s = 1;
  // Port 9 (discard) on loopback: nothing listens, connections are refused at once.
  c.workers.push_back(WorkerConfig{.name = "dead", .url = "http://127.0.0.1:9", .models = {"m"}});
  return c;
}

TEST(Gateway, CreateRefusesAnInvalidConfig) {
  GatewayConfig c = DeadWorkerConfig();
  c.workers.clear();
  auto gw = Gateway::Create(c);
  ASSERT_FALSE(gw.has_value());
  EXPECT_EQ(gw.error(), "workers: at least one worker is required (or discovery.etcd, discovery.kubernetes)");
}

TEST(Gateway, CreateNamesTheTokenizerDirWhenItCannotLoad) {
  GatewayConfig c = DeadWorkerConfig();
  c.tokenizer = {.kind = "hf", .model_dir = "/nonexistent/model"};
  auto gw = Gateway::Create(c);
  ASSERT_FALSE(gw.has_value());
  EXPECT_TRUE(gw.error().starts_with("tokenizer.model_dir: ")) << gw.error();
}

TEST(Gateway, CreateLoadsAnExactTokenizerFromAModelDir) {
  auto dir = tokenize::FindShippedModelDir("qwen3");
  if (!dir) GTEST_FAIL() << "shipped models not installed (make setup installs them): " << dir.error();
  GatewayConfig c = DeadWorkerConfig();
  c.tokenizer = {.kind = "hf", .model_dir = *dir};
  auto gw = Gateway::Create(c);
  EXPECT_TRUE(gw.has_value()) << gw.error();
}

TEST(Gateway, StartsWithoutAnsweringWorkersAndDrainsCleanly) {
  auto gw = Gateway::Create(DeadWorkerConfig());
  ASSERT_TRUE(gw.has_value()) << gw.error();
  ASSERT_TRUE((*gw)->Start().has_value());
  EXPECT_GT((*gw)->port(), 0);
  EXPECT_EQ((*gw)->block_size(), 16u);
  EXPECT_EQ((*gw)->policy().name(), "predicted_latency");
  net::testing::TestClient client;
  ASSERT_TRUE(client.Connect((*gw)->port()));
  client.Send(net::testing::TestClient::Get("/health", false));
  EXPECT_EQ(client.ReadResponse().status, 200);
  EXPECT_EQ((*gw)->Drain(), 0u);
}

}  // namespace
}  // namespace kvroute::gateway
