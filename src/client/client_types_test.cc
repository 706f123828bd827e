#include "client/client_types.h"

#include <gtest/gtest.h>

namespace kvroute::client {
namespace {

TEST(ParseUrl, SplitsHostPortAndTarget) {
  auto u = ParseUrl("http://127.0.0.1:8000/v1/chat/completions?x=1");
  ASSERT_TRUE(u.has_value()) << u.error();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->target, "/v1/chat/completions?x=1");
  EXPECT_EQ(u->Origin(), "127.0.0.1:8000");
}

TEST(ParseUrl, DefaultsToPort80AndRootTarget) {
  auto u = ParseUrl("http://localhost");
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/");
}

TEST(ParseUrl, AcceptsBracketedIpv6) {
  auto u = ParseUrl("http://[::1]:9000/metrics");
  ASSERT_TRUE(u.has_value()) << u.error();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->Origin(), "[::1]:9000");
}

TEST(ParseUrl, RejectsOtherSchemesAndBadPorts) {
  EXPECT_FALSE(ParseUrl("https://example.com/").has_value());
  EXPECT_FALSE(ParseUrl("http://host:0/").has_value());
  EXPECT_FALSE(ParseUrl("http://host:70000/").has_value());
  EXPECT_FALSE(ParseUrl("http://host:12ab/").has_value());
  EXPECT_FALSE(ParseUrl("http://:80/").has_value());
}

TEST(ErrorKindName, NamesEveryKindDistinctly) {
  EXPECT_EQ(ErrorKindName(ErrorKind::kConnectRefused), "connect_refused");
  EXPECT_EQ(ErrorKindName(ErrorKind::kConnectTimeout), "connect_timeout");
  EXPECT_EQ(ErrorKindName(ErrorKind::kFirstByteTimeout), "first_byte_timeout");
  EXPECT_EQ(ErrorKindName(ErrorKind::kIdleTimeout), "idle_timeout");
  EXPECT_EQ(ErrorKindName(ErrorKind::kTotalTimeout), "total_timeout");
  EXPECT_EQ(ErrorKindName(ErrorKind::kClosedEarly), "closed_early");
  EXPECT_EQ(ErrorKindName(ErrorKind::kProtocol), "protocol");
  EXPECT_EQ(ErrorKindName(ErrorKind::kCancelled), "cancelled");
}

}  // namespace
}  // namespace kvroute::client
