#include "gateway/model_catalog.h"

#include <gtest/gtest.h>

#include "gateway/router_metrics.h"

namespace kvroute::gateway {
namespace {

constexpr const char* kVllmModels =
    R"({"object":"list","data":[{"id":"m","object":"model","created":1,"owned_by":"vllm",)"
    R"("root":"/models/m","parent":null,"max_model_len":8192,"permission":[]}]})";

TEST(ParseModelList, ReadsIdAndContextLength) {
  auto cards = ParseModelList(kVllmModels);
  ASSERT_TRUE(cards.has_value()) << cards.error();
  ASSERT_EQ(cards->size(), 1u);
  EXPECT_EQ((*cards)[0].id, "m");
  EXPECT_EQ((*cards)[0].max_model_len, 8192);
  EXPECT_EQ((*cards)[0].root, "/models/m");
}

TEST(ParseModelList, RefusesABodyThatIsNotAModelList) {
  EXPECT_FALSE(ParseModelList("[]").has_value());
  EXPECT_FALSE(ParseModelList("{\"data\": 3}").has_value());
  EXPECT_FALSE(ParseModelList("not json").has_value());
}

TEST(ModelCatalog, ConfiguredNamesStandInWithoutContextLength) {
  ModelCatalog c;
  c.SetConfigured(0, {"m"});
  EXPECT_EQ(c.Cards({0}).size(), 1u);
  EXPECT_FALSE(c.MaxModelLen("m").has_value());
}

TEST(ModelCatalog, TheSmallestReportedContextLengthBinds) {
  ModelCatalog c;
  c.Update(0, {api::ModelCard{.id = "m", .max_model_len = 8192}});
  c.Update(1, {api::ModelCard{.id = "m", .max_model_len = 4096}});
  EXPECT_EQ(c.MaxModelLen("m"), 4096);
  EXPECT_FALSE(c.MaxModelLen("other").has_value());
}

TEST(ModelCatalog, CardsListOnlyTheGivenWorkersOncePerModel) {
  ModelCatalog c;
  c.Update(0, {api::ModelCard{.id = "a"}, api::ModelCard{.id = "b"}});
  c.Update(1, {api::ModelCard{.id = "b"}, api::ModelCard{.id = "c"}});
  auto cards = c.Cards({1});
  ASSERT_EQ(cards.size(), 2u);
  EXPECT_EQ(cards[0].id, "b");
  EXPECT_EQ(cards[1].id, "c");
  EXPECT_EQ(c.Cards({0, 1}).size(), 3u);
}

TEST(RouterMetrics, ExposesEveryFamilyWithItsLabels) {
  RouterMetrics m;
  m.OnRequestDone("m", "w0", 200);
  m.ObserveTtft("m", 0.05);
  m.AddPredictedCached("gpu", 32);
  m.SetWorkerState("w0", true, false, 3);
  std::string text = m.Expose();
  EXPECT_NE(text.find(R"(kvroute_requests_total{model="m",status="200",worker="w0"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(kvroute_ttft_seconds_count{model="m"} 1)"), std::string::npos);
  EXPECT_NE(text.find(R"(kvroute_predicted_cached_tokens_total{tier="gpu"} 32)"),
            std::string::npos);
  EXPECT_NE(text.find(R"(kvroute_worker_inflight_requests{worker="w0"} 3)"), std::string::npos);
  EXPECT_NE(text.find("# TYPE kvroute_decision_latency_seconds histogram"), std::string::npos);
}

TEST(RouterMetrics, LearnedTierBandwidthsPerWorkerAndTierAreForgottenWithTheWorker) {
  RouterMetrics m;
  m.SetTierLoad("w0", "SHARED", 3.125e9, 38);
  m.SetTierLoad("w0", "DISK", 6.5e9, 0);
  m.SetTierLoad("w1", "SHARED", 1.25e10, 2);
  std::string text = m.Expose();
  EXPECT_NE(text.find(R"(kvroute_tier_load_bytes_per_s{tier="SHARED",worker="w0"} 3125000000)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(kvroute_tier_load_samples{tier="SHARED",worker="w0"} 38)"),
            std::string::npos);
  EXPECT_NE(text.find(R"(kvroute_tier_load_bytes_per_s{tier="DISK",worker="w0"} 6500000000)"),
            std::string::npos);
  m.ForgetWorker("w0");
  text = m.Expose();
  EXPECT_EQ(text.find(R"(worker="w0")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(kvroute_tier_load_samples{tier="SHARED",worker="w1"} 2)"),
            std::string::npos);
}

}  // namespace
}  // namespace kvroute::gateway
