// ApiClient's URL rules and the failures it reports before any I/O. Transport (plain and TLS,
// a wrong CA, a name mismatch) is tested against a real TLS server in
// tests/integration/k8s/serve_tls_test.py.
#include "k8s/api_client.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace kvroute::k8s {
namespace {

TEST(ParseApiUrl, HttpsDefaultsTo443AndHttpTo80) {
  auto a = ParseApiUrl("https://10.96.0.1");
  ASSERT_TRUE(a.has_value()) << a.error();
  EXPECT_TRUE(a->tls);
  EXPECT_EQ(a->host, "10.96.0.1");
  EXPECT_EQ(a->port, 443);
  auto b = ParseApiUrl("http://127.0.0.1:8001/");
  ASSERT_TRUE(b.has_value()) << b.error();
  EXPECT_FALSE(b->tls);
  EXPECT_EQ(b->port, 8001);
  auto v6 = ParseApiUrl("https://[fd00::1]:6443");
  ASSERT_TRUE(v6.has_value()) << v6.error();
  EXPECT_EQ(v6->host, "fd00::1");
  EXPECT_EQ(v6->port, 6443);
}

TEST(ParseApiUrl, OtherSchemesPathsAndBadPortsAreRefused) {
  EXPECT_FALSE(ParseApiUrl("ftp://h:1").has_value());
  EXPECT_FALSE(ParseApiUrl("10.96.0.1:443").has_value());
  EXPECT_FALSE(ParseApiUrl("https://h:1/api").has_value());
  EXPECT_FALSE(ParseApiUrl("https://h:0").has_value());
  EXPECT_FALSE(ParseApiUrl("https://h:70000").has_value());
  EXPECT_FALSE(ParseApiUrl("https://:443").has_value());
}

TEST(ApiClient, HttpsNeedsALoadableCaBundle) {
  auto none = ApiClient::Create({.api_url = "https://127.0.0.1:1"});
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().find("needs a CA file"), std::string::npos) << none.error();
  const auto garbage = std::filesystem::temp_directory_path() / ("kvroute-ca-" + std::to_string(::getpid()));
  std::ofstream(garbage) << "not a certificate\n";
  auto bad = ApiClient::Create({.api_url = "https://127.0.0.1:1", .ca_file = garbage.string()});
  std::filesystem::remove(garbage);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().find("not a PEM CA bundle"), std::string::npos) << bad.error();
}

TEST(ApiClient, AClosedPortIsAConnectErrorNamingTheOrigin) {
  auto c = ApiClient::Create({.api_url = "http://127.0.0.1:1"});
  ASSERT_TRUE(c.has_value()) << c.error();
  auto r = (*c)->Get("/api/v1/namespaces/x/pods");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("connect 127.0.0.1:1"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace kvroute::k8s
