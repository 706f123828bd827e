#include "bench/nginx.h"

#include <gtest/gtest.h>

namespace kvroute::bench {
namespace {

NginxOptions TwoWorkers(bool least_conn) {
  NginxOptions o;
  o.upstreams = {"127.0.0.1:9001", "127.0.0.1:9002"};
  o.least_conn = least_conn;
  o.listen_port = 8123;
  o.dir = "/tmp/x";
  return o;
}

TEST(NginxConfigTest, ListsEveryUpstreamServer) {
  const std::string c = NginxConfig(TwoWorkers(false));
  EXPECT_NE(c.find("server 127.0.0.1:9001"), std::string::npos);
  EXPECT_NE(c.find("server 127.0.0.1:9002"), std::string::npos);
}

TEST(NginxConfigTest, RoundRobinHasNoBalancingDirective) {
  EXPECT_EQ(NginxConfig(TwoWorkers(false)).find("least_conn"), std::string::npos);
}

TEST(NginxConfigTest, LeastConnIsInsideTheUpstreamBlock) {
  const std::string c = NginxConfig(TwoWorkers(true));
  const auto upstream = c.find("upstream workers {");
  const auto lc = c.find("least_conn;");
  ASSERT_NE(upstream, std::string::npos);
  ASSERT_NE(lc, std::string::npos);
  EXPECT_GT(lc, upstream);
  EXPECT_LT(lc, c.find('}', upstream));
}

TEST(NginxConfigTest, KeepsUpstreamConnectionsAlive) {
  const std::string c = NginxConfig(TwoWorkers(false));
  EXPECT_NE(c.find("keepalive 64;"), std::string::npos);
  EXPECT_NE(c.find("proxy_http_version 1.1;"), std::string::npos);
  EXPECT_NE(c.find("proxy_set_header Connection \"\";"), std::string::npos);
}

TEST(NginxConfigTest, StreamsWithoutBuffering) {
  const std::string c = NginxConfig(TwoWorkers(false));
  EXPECT_NE(c.find("proxy_buffering off;"), std::string::npos);
}

TEST(NginxConfigTest, ListensOnLoopbackAndKeepsFilesInItsFolder) {
  const std::string c = NginxConfig(TwoWorkers(false));
  EXPECT_NE(c.find("listen 127.0.0.1:8123;"), std::string::npos);
  EXPECT_NE(c.find("daemon off;"), std::string::npos);
  EXPECT_NE(c.find("pid /tmp/x/nginx.pid;"), std::string::npos);
  EXPECT_NE(c.find("error_log /tmp/x/error.log"), std::string::npos);
  EXPECT_NE(c.find("access_log /tmp/x/access.log;"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::bench
