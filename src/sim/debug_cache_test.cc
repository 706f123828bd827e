#include "sim/debug_cache.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

namespace kvroute::sim {
namespace {

TEST(KvCacheDebugJsonTest, HashesAboveTwoToThe53StayExactUint64) {
  CacheContents c;
  c.tiers[static_cast<int>(kv::Tier::kGpu)] = {0xFFFFFFFFFFFFFFFFull, 1};
  c.tiers[static_cast<int>(kv::Tier::kCpu)] = {0x8000000000000001ull};
  engine::EngineConfig config;
  auto v = boost::json::parse(KvCacheDebugJson(c, config, nullptr)).as_object();
  const auto& gpu = v.at("tiers").at("GPU").as_array();
  ASSERT_EQ(gpu.size(), 2u);
  EXPECT_EQ(gpu[0].to_number<std::uint64_t>(), 0xFFFFFFFFFFFFFFFFull);
  EXPECT_EQ(v.at("tiers").at("CPU").as_array()[0].to_number<std::uint64_t>(),
            0x8000000000000001ull);
  EXPECT_TRUE(v.at("tiers").at("DISK").as_array().empty());
}

TEST(KvCacheDebugJsonTest, NamesTheHashAlgorithmSeedAndBlockSize) {
  engine::EngineConfig config;
  config.block_size = 32;
  config.python_hash_seed = "42";
  auto v = boost::json::parse(KvCacheDebugJson({}, config, nullptr)).as_object();
  EXPECT_EQ(v.at("block_size").to_number<int>(), 32);
  EXPECT_EQ(v.at("hash_algo").as_string(), "sha256_cbor");
  EXPECT_EQ(v.at("python_hash_seed").as_string(), "42");
  EXPECT_TRUE(v.at("kv_events").is_null());
  config.event_hash = engine::EventHash::kBlockKey;
  v = boost::json::parse(KvCacheDebugJson({}, config, nullptr)).as_object();
  EXPECT_EQ(v.at("hash_algo").as_string(), "block_key");
}

TEST(KvCacheDebugJsonTest, ReportsThePublishersBatchCount) {
  kv::ZmqPublisherStats stats;
  stats.published = 17;
  CacheContents c;
  c.stats.num_running = 2;
  auto v = boost::json::parse(KvCacheDebugJson(c, engine::EngineConfig{}, &stats)).as_object();
  EXPECT_EQ(v.at("kv_events").at("published").to_number<std::uint64_t>(), 17u);
  EXPECT_EQ(v.at("num_running").to_number<int>(), 2);
}

}  // namespace
}  // namespace kvroute::sim
