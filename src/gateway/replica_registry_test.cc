// The registry's value and address rules (the etcd side runs in ctest etcd_replicas).
#include "gateway/replica_registry.h"

#include <gtest/gtest.h>

namespace kvroute::gateway {
namespace {

TEST(ReplicaRegistryTest, AdvertisesTheConfiguredUrlElseTheListener) {
  EXPECT_EQ(AdvertiseUrl("http://10.0.0.5:8080", "0.0.0.0", 9000), "http://10.0.0.5:8080");
  EXPECT_EQ(AdvertiseUrl("", "127.0.0.1", 9000), "http://127.0.0.1:9000");
  EXPECT_EQ(AdvertiseUrl("", "::1", 9000), "http://[::1]:9000");
}

TEST(ReplicaRegistryTest, AValueIsAnObjectWithAnHttpUrl) {
  EXPECT_EQ(ReplicaUrlOf(R"({"url": "http://127.0.0.1:9000"})"), "http://127.0.0.1:9000");
  EXPECT_EQ(ReplicaUrlOf(R"({"url": "https://x:1"})"), std::nullopt);
  EXPECT_EQ(ReplicaUrlOf(R"({"name": "r0"})"), std::nullopt);
  EXPECT_EQ(ReplicaUrlOf("not json"), std::nullopt);
}

}  // namespace
}  // namespace kvroute::gateway
