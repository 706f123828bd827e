// BookingFor / CachedPrefixOn: the one rule for what a decision books on its worker.
#include "fleet/booking.h"

#include <gtest/gtest.h>

namespace kvroute::fleet {
namespace {

sched::RequestProfile Profile(std::uint64_t prompt, std::uint64_t output) {
  sched::RequestProfile p;
  p.prompt_tokens = prompt;
  p.block_size = 16;
  p.num_full_blocks = static_cast<std::uint32_t>(prompt / 16);
  p.predicted_output_tokens = output;
  return p;
}

sched::CacheView View(WorkerId worker, std::uint32_t gpu, std::uint32_t cpu, std::uint32_t any) {
  sched::CacheView v;
  v.worker = worker;
  v.depth_blocks[static_cast<int>(Tier::kGpu)] = gpu;
  v.depth_blocks[static_cast<int>(Tier::kCpu)] = cpu;
  v.any_depth_blocks = any;
  return v;
}

TEST(BookingTest, TheDeepestPrefixInAnyTierIsCachedAndTheRestIsPrefilled) {
  sched::RequestProfile p = Profile(1000, 200);  // 62 full blocks
  p.cache_views = {View(0, 10, 0, 10), View(3, 5, 40, 20)};
  const CachedPrefix cached = CachedPrefixOn(p, 3);
  EXPECT_EQ(cached.blocks[static_cast<int>(Tier::kGpu)], 5u);
  EXPECT_EQ(cached.any_blocks, 40u);  // the CPU tier is deeper than the "any" depth said
  const RoutedRequest r = BookingFor(p, cached, 3, nullptr, 1);
  EXPECT_EQ(r.worker, 3u);
  EXPECT_EQ(r.prompt_tokens, 1000u);
  EXPECT_EQ(r.uncached_tokens, 1000u - 40 * 16);
  EXPECT_EQ(r.kv_blocks, (1000u + 200 + 15) / 16);
  EXPECT_FALSE(r.predicted_ttft_s.has_value());
}

TEST(BookingTest, ACachedPrefixNeverExceedsThePromptsFullBlocks) {
  sched::RequestProfile p = Profile(100, 0);  // 6 full blocks
  p.cache_views = {View(1, 50, 0, 80)};
  const CachedPrefix cached = CachedPrefixOn(p, 1);
  EXPECT_EQ(cached.any_blocks, 6u);
  EXPECT_EQ(BookingFor(p, cached, 1, nullptr, 1).uncached_tokens, 100u - 6 * 16);
}

TEST(BookingTest, AWorkerWithoutACacheViewPrefillsTheWholePrompt) {
  sched::RequestProfile p = Profile(4096, 10);
  p.cache_views = {View(0, 100, 0, 100)};
  const CachedPrefix cached = CachedPrefixOn(p, 2);
  EXPECT_EQ(cached.any_blocks, 0u);
  EXPECT_EQ(BookingFor(p, cached, 2, nullptr, 1).uncached_tokens, 4096u);
}

TEST(BookingTest, ThePredictionOfTheChosenWorkerIsBookedWithItsWaitCorrection) {
  sched::RequestProfile p = Profile(512, 64);
  sched::Decision d;
  d.chosen = 7;
  sched::CandidateTrace other;
  other.worker = 6;
  other.predicted_ttft_s = 9;
  sched::CandidateTrace chosen;
  chosen.worker = 7;
  chosen.predicted_ttft_s = 1.5;
  chosen.predicted_wait_s = 0.5;
  d.candidates = {other, chosen};
  const RoutedRequest r = BookingFor(p, {}, 7, &d, 2.5);
  EXPECT_EQ(r.predicted_ttft_s, 1.5);
  EXPECT_EQ(r.predicted_wait_s, 0.5);
  EXPECT_EQ(r.wait_correction, 2.5);
  // No trace for the worker (a fallback chose it): no prediction, no correction.
  const RoutedRequest none = BookingFor(p, {}, 8, &d, 2.5);
  EXPECT_FALSE(none.predicted_ttft_s.has_value());
  EXPECT_EQ(none.wait_correction, 1);
}

}  // namespace
}  // namespace kvroute::fleet
