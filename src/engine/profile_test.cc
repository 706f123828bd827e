#include "engine/profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

namespace kvroute::engine {
namespace {

constexpr std::string_view kMinimal = R"(
name: tiny
served_model_name: org/tiny
max_model_len: 4096
model:
  source: test
  hf_name: org/tiny
  num_layers: 2
  hidden_size: 64
  num_attention_heads: 4
  num_kv_heads: 2
  head_dim: 16
  total_params: 1.0e6
  active_params: 1.0e6
  weight_bytes_per_param: 2
  kv_bytes_per_element: 2
hardware:
  source: test
  gpu: toy
  num_gpus: 1
  memory_bytes_per_gpu: 1.0e9
  hbm_bandwidth_bytes_per_s: 1.0e11
  peak_flops: 1.0e12
runtime:
  source: test
anchors:
  - name: a
    source: test
    metric: decode_step_s
    min: 0.001
    max: 0.002
)";

TEST(ProfileTest, EmbeddedProfilesIncludeTheRequiredSetups) {
  const std::vector<std::string> names = ListProfiles();
  for (const char* want : {"qwen3-32b-tp2-h100", "llama-3.1-8b-h100", "deepseek-v3-h200"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(ProfileTest, EveryEmbeddedProfileParsesAndHasAnchors) {
  for (const std::string& name : ListProfiles()) {
    auto p = LoadProfile(name);
    ASSERT_TRUE(p.has_value()) << p.error();
    EXPECT_EQ(p->name, name);
    EXPECT_FALSE(p->anchors.empty()) << name;
    EXPECT_FALSE(p->model.source.empty());
    EXPECT_FALSE(p->hardware.source.empty());
    EXPECT_FALSE(p->runtime.source.empty());
  }
}

TEST(ProfileTest, DefaultProfileExists) {
  auto p = LoadProfile(kDefaultProfileName);
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_EQ(p->served_model_name, "Qwen/Qwen3-32B");
  EXPECT_EQ(p->hardware.num_gpus, 2u);
  EXPECT_EQ(p->model.num_kv_heads, 8u);
}

TEST(ProfileTest, MlaProfileReadsLatentDimensions) {
  auto p = LoadProfile("deepseek-v3-h200");
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_TRUE(p->model.mla);
  EXPECT_EQ(p->model.kv_lora_rank, 512u);
  EXPECT_EQ(p->model.qk_rope_head_dim, 64u);
  EXPECT_LT(p->model.active_params, p->model.total_params);
}

TEST(ProfileTest, ParsesMinimalTextWithDefaults) {
  auto p = ParseProfile(kMinimal);
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_EQ(p->name, "tiny");
  EXPECT_EQ(p->max_model_len, 4096u);
  EXPECT_DOUBLE_EQ(p->runtime.gpu_memory_utilization, 0.9);
  ASSERT_EQ(p->anchors.size(), 1u);
  EXPECT_EQ(p->anchors[0].metric, AnchorMetric::kDecodeStepS);
  EXPECT_EQ(p->anchors[0].batch_size, 1u);
}

TEST(ProfileTest, MissingSourceIsAnError) {
  std::string text(kMinimal);
  text.replace(text.find("model:\n  source: test"), 21, "model:\n  sourcex: te");
  auto p = ParseProfile(text, "mem");
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().find("source"), std::string::npos) << p.error();
}

TEST(ProfileTest, BadAnchorBoundsAreAnError) {
  std::string text(kMinimal);
  text.replace(text.find("max: 0.002"), 10, "max: 0.0001");
  auto p = ParseProfile(text);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().find("min <= max"), std::string::npos) << p.error();
}

TEST(ProfileTest, MalformedYamlIsAnErrorNotACrash) {
  auto p = ParseProfile("name: [unterminated", "bad");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().rfind("bad", 0), 0u) << p.error();
}

TEST(ProfileTest, UnknownNameListsKnownProfiles) {
  auto p = LoadProfile("no-such-profile");
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().find("qwen3-32b-tp2-h100"), std::string::npos) << p.error();
}

TEST(ProfileTest, LoadsFromAPath) {
  const std::string path = ::testing::TempDir() + "/kvroute_profile_test.yaml";
  {
    std::ofstream out(path);
    out << kMinimal;
  }
  auto p = LoadProfile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_EQ(p->name, "tiny");
}

TEST(ProfileTest, MissingFileIsAnError) {
  auto p = LoadProfile("/nonexistent/dir/x.yaml");
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::engine
