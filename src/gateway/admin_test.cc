#include "gateway/admin.h"

#include <gtest/gtest.h>

namespace kvroute::gateway {
namespace {

TEST(Authorized, NoConfiguredKeysLetsEveryoneIn) {
  EXPECT_TRUE(Authorized("", {}));
  EXPECT_TRUE(Authorized("Bearer anything", {}));
}

TEST(Authorized, AcceptsOnlyAConfiguredBearerToken) {
  const std::vector<std::string> keys = {"k-1", "k-22"};
  EXPECT_TRUE(Authorized("Bearer k-1", keys));
  EXPECT_TRUE(Authorized("Bearer k-22", keys));
  EXPECT_FALSE(Authorized("Bearer k-2", keys));
  EXPECT_FALSE(Authorized("Bearer k-1x", keys));
  EXPECT_FALSE(Authorized("k-1", keys));
  EXPECT_FALSE(Authorized("Basic k-1", keys));
  EXPECT_FALSE(Authorized("", keys));
}

}  // namespace
}  // namespace kvroute::gateway
