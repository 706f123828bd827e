#include "sim/sim_config.h"

#include <gtest/gtest.h>

namespace kvroute::sim {
namespace {

TEST(SimConfigTest, DefaultsAreValidAndMatchVllm) {
  SimConfig c;
  EXPECT_TRUE(Validate(c).has_value());
  EXPECT_EQ(c.kv_events_endpoint, "tcp://*:5557");
  EXPECT_EQ(c.block_size, 16u);
  EXPECT_EQ(c.shutdown_timeout_s, 0);
}

TEST(SimConfigTest, RejectsValuesOutOfRangeNamingTheFlag) {
  SimConfig c;
  c.block_size = 7;
  auto r = Validate(c);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("--block-size"), std::string::npos);
  c = SimConfig{};
  c.speedup = 0;
  EXPECT_FALSE(Validate(c).has_value());
  c = SimConfig{};
  c.kv_events_encoding = "json";
  EXPECT_FALSE(Validate(c).has_value());
}

TEST(SimConfigTest, DropEveryOneIsRejectedBecauseItWouldDropEveryBatch) {
  SimConfig c;
  c.kv_events_drop_every = 1;
  auto r = Validate(c);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("--kv-events-drop-every"), std::string::npos);
  c.kv_events_drop_every = 7;
  EXPECT_TRUE(Validate(c).has_value());
}

TEST(SimConfigTest, EngineConfigCarriesTheEngineKnobs) {
  SimConfig c;
  c.block_size = 32;
  c.num_gpu_blocks = 100;
  c.max_model_len = 4096;
  auto e = c.ToEngineConfig();
  EXPECT_EQ(e.block_size, 32u);
  EXPECT_EQ(e.num_gpu_blocks_override, 100);
  EXPECT_EQ(e.max_model_len, 4096u);
}

TEST(ReadYamlKeyValuesTest, ReadsScalarsAndListsWithFlagSpelling) {
  auto kv = ReadYamlKeyValues("max_num_seqs: 8\nserved-model-name: m\nlist: [a, b]\n");
  ASSERT_TRUE(kv.has_value()) << kv.error();
  ASSERT_EQ(kv->size(), 3u);
  EXPECT_EQ((*kv)[0].first, "max-num-seqs");
  EXPECT_EQ((*kv)[0].second, std::vector<std::string>{"8"});
  EXPECT_EQ((*kv)[1].first, "served-model-name");
  EXPECT_EQ((*kv)[2].second, (std::vector<std::string>{"a", "b"}));
}

TEST(ReadYamlKeyValuesTest, EmptyFileSetsNothing) {
  auto kv = ReadYamlKeyValues("");
  ASSERT_TRUE(kv.has_value());
  EXPECT_TRUE(kv->empty());
}

TEST(ReadYamlKeyValuesTest, RejectsNonMappingsAndNestedMappings) {
  EXPECT_FALSE(ReadYamlKeyValues("- a\n- b\n").has_value());
  EXPECT_FALSE(ReadYamlKeyValues("a: {b: 1}\n").has_value());
  EXPECT_FALSE(ReadYamlKeyValues("a: [\n").has_value());
}

}  // namespace
}  // namespace kvroute::sim
