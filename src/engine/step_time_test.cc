#include "engine/step_time.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

namespace kvroute::engine {
namespace {

Profile MustLoad(std::string_view name) {
  auto p = LoadProfile(name);
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error());
  return p.value_or(Profile{});
}

double Predict(const StepTimeModel& model, const Anchor& a) {
  switch (a.metric) {
    case AnchorMetric::kPrefillTokensPerS:
      return a.prompt_tokens / ToSeconds(model.PrefillTime(a.prompt_tokens, a.context_tokens));
    case AnchorMetric::kDecodeStepS:
      return ToSeconds(
          model.DecodeStepTime(a.batch_size, std::uint64_t{a.batch_size} * a.context_tokens));
    case AnchorMetric::kDecodeTokensPerS:
      return a.batch_size / ToSeconds(model.DecodeStepTime(
                                a.batch_size, std::uint64_t{a.batch_size} * a.context_tokens));
  }
  return 0;
}

// The contract of every profile: the model reproduces each published anchor within its band.
TEST(StepTimeTest, EveryProfileMatchesEveryAnchor) {
  int checked = 0;
  for (const std::string& name : ListProfiles()) {
    const Profile p = MustLoad(name);
    const StepTimeModel model(p);
    for (const Anchor& a : p.anchors) {
      const double v = Predict(model, a);
      std::printf("%-20s %-22s predicted %10.4g  band [%.4g, %.4g]  %s\n", name.c_str(),
                  AnchorMetricName(a.metric), v, a.min, a.max, a.name.c_str());
      EXPECT_GE(v, a.min) << name << " / " << a.name << " (" << AnchorMetricName(a.metric) << ")";
      EXPECT_LE(v, a.max) << name << " / " << a.name << " (" << AnchorMetricName(a.metric) << ")";
      ++checked;
    }
  }
  EXPECT_GE(checked, 4);
}

TEST(StepTimeTest, QwenPeakPrefillIsInsideTheLlmdBand) {
  const StepTimeModel model(MustLoad("qwen3-32b-tp2-h100"));
  const double tps = 8192 / ToSeconds(model.PrefillTime(8192, 0));
  EXPECT_GE(tps, 15928);
  EXPECT_LE(tps, 20480);
}

TEST(StepTimeTest, EmptyStepTakesNoTime) {
  const StepTimeModel model(MustLoad("qwen3-32b-tp2-h100"));
  EXPECT_EQ(model.StepTime({}).count(), 0);
  EXPECT_EQ(model.DecodeStepTime(0, 0).count(), 0);
}

TEST(StepTimeTest, LongerContextMakesDecodeSlower) {
  const StepTimeModel model(MustLoad("qwen3-32b-tp2-h100"));
  EXPECT_LT(model.DecodeStepTime(64, 64 * 1000), model.DecodeStepTime(64, 64 * 8000));
}

TEST(StepTimeTest, CachedContextMakesPrefillOfTheSameTokensSlowerNotFaster) {
  // Attention over a cached prefix still costs; only the prefix's own prefill is saved.
  const StepTimeModel model(MustLoad("qwen3-32b-tp2-h100"));
  EXPECT_LT(model.PrefillTime(2048, 0), model.PrefillTime(2048, 30000));
  EXPECT_LT(model.PrefillTime(2048, 30000), model.PrefillTime(32048, 0));
}

TEST(StepTimeTest, SmallDecodeBatchIsMemoryBoundLargePrefillComputeBound) {
  const Profile p = MustLoad("llama-3.1-8b-h100");
  const StepTimeModel model(p);
  // Batch 1 decode ≈ reading the weights once.
  const double weights_s = p.model.total_params * p.model.weight_bytes_per_param /
                           (p.hardware.hbm_bandwidth_bytes_per_s * p.runtime.memory_efficiency);
  EXPECT_NEAR(ToSeconds(model.DecodeStepTime(1, 16)), weights_s + p.runtime.step_overhead_s,
              weights_s * 0.05);
  // Doubling a big prefill chunk about doubles its time (compute bound), while doubling a
  // small decode batch barely moves it (memory bound).
  const double p1 = ToSeconds(model.PrefillTime(4096));
  const double p2 = ToSeconds(model.PrefillTime(8192));
  EXPECT_GT(p2 / p1, 1.8);
  const double d1 = ToSeconds(model.DecodeStepTime(4, 4 * 100));
  const double d2 = ToSeconds(model.DecodeStepTime(8, 8 * 100));
  EXPECT_LT(d2 / d1, 1.1);
}

TEST(StepTimeTest, MixedStepEqualsSumOfWorkNotSumOfTimes) {
  // One step of prefill + decodes costs one weight read, not two.
  const StepTimeModel model(MustLoad("qwen3-32b-tp2-h100"));
  std::vector<SeqWork> mixed = {{.new_tokens = 512, .context_tokens = 0}};
  for (int i = 0; i < 16; ++i) mixed.push_back({.new_tokens = 1, .context_tokens = 1000});
  const Nanos together = model.StepTime(mixed);
  const Nanos apart = model.PrefillTime(512) + model.DecodeStepTime(16, 16 * 1000);
  EXPECT_LT(together, apart);
  EXPECT_GE(together, model.PrefillTime(512));
}

TEST(StepTimeTest, GqaKvBytesSplitOverTensorParallelRanks) {
  const StepTimeModel model(MustLoad("qwen3-32b-tp2-h100"));
  // 2 (K,V) × 64 layers × 8 heads × 128 dims × 2 bytes = 256 KiB per token, half per rank.
  EXPECT_DOUBLE_EQ(model.KvBytesPerTokenTransfer(), 262144.0);
  EXPECT_DOUBLE_EQ(model.KvBytesPerTokenPerGpu(), 131072.0);
}

TEST(StepTimeTest, MlaKvBytesComeFromTheLatentAndAreReplicated) {
  const StepTimeModel model(MustLoad("deepseek-v3-h200"));
  // 61 layers × (512 + 64) × 2 bytes on every rank.
  EXPECT_DOUBLE_EQ(model.KvBytesPerTokenPerGpu(), 61.0 * 576 * 2);
  EXPECT_DOUBLE_EQ(model.KvBytesPerTokenTransfer(), 61.0 * 576 * 2);
}

TEST(StepTimeTest, CapacityFollowsMemoryArithmetic) {
  const Profile p = MustLoad("qwen3-32b-tp2-h100");
  const StepTimeModel model(p);
  const double free_bytes = p.hardware.memory_bytes_per_gpu * p.runtime.gpu_memory_utilization -
                            p.model.total_params * p.model.weight_bytes_per_param / 2 -
                            p.runtime.activation_reserve_bytes_per_gpu;
  const auto expect = static_cast<std::int64_t>(free_bytes / (131072.0 * 16));
  EXPECT_EQ(model.NumGpuBlocks(16), expect);
  EXPECT_GT(expect, 10000);  // ~270k tokens of KV: the order vLLM reports for this setup
  EXPECT_EQ(model.NumGpuBlocks(32), static_cast<std::int64_t>(free_bytes / (131072.0 * 32)));
}

TEST(StepTimeTest, NoRoomForWeightsMeansZeroBlocks) {
  Profile p = MustLoad("llama-3.1-8b-h100");
  p.hardware.memory_bytes_per_gpu = 4e9;
  EXPECT_EQ(StepTimeModel(p).NumGpuBlocks(16), 0);
}

}  // namespace
}  // namespace kvroute::engine

namespace kvroute::engine {
namespace {

TEST(StepTimeMoeTest, ManyExpertModelsReadOnlyTheExpertsTheirTokensTouch) {
  const Profile p = MustLoad("kimi-k2.6-mi355x-tp4");
  const StepTimeModel model(p);
  // top-8 of 384: a batch of 1 touches ~2 % of the experts, a batch of 512 nearly all, so
  // the memory-bound step grows with the batch far more than a dense model's.
  const double b1 = ToSeconds(model.DecodeStepTime(1, 1000)) - p.runtime.step_overhead_s;
  const double b512 = ToSeconds(model.DecodeStepTime(512, 512 * 1000)) - p.runtime.step_overhead_s;
  const double all_weights_s = p.model.total_params * p.model.weight_bytes_per_param /
                               p.hardware.num_gpus /
                               (p.hardware.hbm_bandwidth_bytes_per_s * p.runtime.memory_efficiency);
  EXPECT_LT(b1, 0.1 * all_weights_s);
  EXPECT_GT(b512, 0.9 * all_weights_s);
  // Without the MoE fields every weight is read at any batch (the conservative default).
  Profile dense_reading = p;
  dense_reading.model.num_experts = 0;
  EXPECT_GT(ToSeconds(StepTimeModel(dense_reading).DecodeStepTime(1, 1000)) -
                p.runtime.step_overhead_s,
            all_weights_s);
}

TEST(StepTimeMoeTest, KimiTp2DecodeFitsOnlyWithExpertsShardedOverTheDpGroup) {
  Profile p = MustLoad("kimi-k2.6-mi355x-tp2");
  EXPECT_EQ(p.hardware.WeightShards(), 8u);
  EXPECT_GT(StepTimeModel(p).NumGpuBlocks(16), 0);
  p.hardware.weight_shards = 0;  // plain TP2: 280 GB of weights per 288 GB GPU at 0.85
  EXPECT_EQ(StepTimeModel(p).NumGpuBlocks(16), 0);
}

TEST(ProfileLinksTest, EveryProfileHasAKvLinkWithASource) {
  for (const std::string& name : ListProfiles()) {
    const Profile p = MustLoad(name);
    ASSERT_FALSE(p.links.empty()) << name;
    for (const LinkSpec& l : p.links) {
      EXPECT_GT(l.bandwidth_bytes_per_s, 0) << name << " " << l.name;
      EXPECT_FALSE(l.source.empty()) << name << " " << l.name;
    }
    EXPECT_EQ(p.FindLink(""), &p.links.front());
    EXPECT_EQ(p.FindLink("no-such-link"), nullptr);
  }
}

}  // namespace
}  // namespace kvroute::engine
