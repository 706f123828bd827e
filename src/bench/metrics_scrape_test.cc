#include "bench/metrics_scrape.h"

#include <gtest/gtest.h>

namespace kvroute::bench {
namespace {

constexpr std::string_view kExposition =
    "# HELP vllm:prefix_cache_queries_total Prefix cache queries (tokens).\n"
    "# TYPE vllm:prefix_cache_queries_total counter\n"
    "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 1000\n"
    "vllm:prefix_cache_queries_total{engine=\"1\",model_name=\"m\"} 500 1700000000000\n"
    "vllm:prefix_cache_queries_total_created{engine=\"0\"} 1.7e9\n"
    "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} 750.5\n"
    "vllm:num_requests_running 3\n";

TEST(SumSamples, SumsEveryLabelSetAndIgnoresLongerNames) {
  EXPECT_DOUBLE_EQ(*SumSamples(kExposition, "vllm:prefix_cache_queries_total"), 1500);
  EXPECT_DOUBLE_EQ(*SumSamples(kExposition, "vllm:prefix_cache_hits_total"), 750.5);
  EXPECT_DOUBLE_EQ(*SumSamples(kExposition, "vllm:num_requests_running"), 3);
}

TEST(SumSamples, MissingMetricIsNullopt) {
  EXPECT_FALSE(SumSamples(kExposition, "vllm:nothing").has_value());
  EXPECT_FALSE(SumSamples("", "x").has_value());
}

TEST(SumSamples, SkipsMalformedLines) {
  EXPECT_DOUBLE_EQ(*SumSamples("m{a=\"1\" 5\nm abc\nm 2\n", "m"), 2);
}

TEST(ReadCacheCounters, ReadsGpuAndAbsentExternalTier) {
  CacheCounters c = ReadCacheCounters(kExposition);
  EXPECT_DOUBLE_EQ(*c.queries, 1500);
  EXPECT_DOUBLE_EQ(*c.hits, 750.5);
  EXPECT_FALSE(c.external_queries.has_value());
}

// kvroute sim with lower tiers: one sample per tier, per worker.
TEST(ReadCacheCounters, ReadsHitsPerTierByTheirLabel) {
  constexpr std::string_view kTiers =
      "kvroute:kv_tier_hit_tokens_total{tier=\"GPU\"} 300\n"
      "kvroute:kv_tier_hit_tokens_total{tier=\"CPU\"} 40\n"
      "kvroute:kv_tier_hit_tokens_total{subtier=\"DISK\"} 9\n"  // not the tier label
      "kvroute:kv_tier_hit_tokens_total{model=\"m\",tier=\"DISK\"} 20\n"
      "kvroute:kv_tier_hit_tokens_total 5\n";  // unlabelled: no tier
  const CacheCounters c = ReadCacheCounters(kTiers);
  EXPECT_DOUBLE_EQ(*c.tier_hits[0], 300);
  EXPECT_DOUBLE_EQ(*c.tier_hits[1], 40);
  EXPECT_DOUBLE_EQ(*c.tier_hits[2], 20);
  EXPECT_FALSE(c.tier_hits[3].has_value());
  EXPECT_FALSE(ReadCacheCounters(kExposition).tier_hits[0].has_value());
}

TEST(Accumulate, SumsWorkersAndKeepsMissingAsMissing) {
  CacheCounters a = ReadCacheCounters(kExposition);
  Accumulate(a, ReadCacheCounters(kExposition));
  EXPECT_DOUBLE_EQ(*a.queries, 3000);
  EXPECT_FALSE(a.external_hits.has_value());
}

}  // namespace
}  // namespace kvroute::bench
