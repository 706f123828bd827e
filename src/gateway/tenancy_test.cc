#include "gateway/tenancy.h"

#include <gtest/gtest.h>

#include "gateway/config.h"

namespace kvroute::gateway {
namespace {

net::HttpRequest WithHeader(std::string name, std::string value) {
  net::HttpRequest r;
  r.headers.emplace_back(std::move(name), std::move(value));
  return r;
}

TEST(TenancyTest, OffByDefault) {
  TenantSalts salts;
  EXPECT_FALSE(salts.enabled());
  EXPECT_EQ(salts.SaltFor(WithHeader("authorization", "Bearer k")), "");
}

TEST(TenancyTest, ApiKeysMapToTheirSaltsAndUnlistedOnesGetADerivedOne) {
  TenancyConfig c;
  c.from = "api_key";
  c.salts = {{"key-a", "team-a"}};
  c.secret = "s3cret";
  TenantSalts salts(c);
  EXPECT_EQ(salts.SaltFor(WithHeader("authorization", "Bearer key-a")), "team-a");
  // The Messages API's header names the same tenant.
  EXPECT_EQ(salts.SaltFor(WithHeader("x-api-key", "key-a")), "team-a");
  const std::string derived = salts.SaltFor(WithHeader("authorization", "Bearer key-b"));
  EXPECT_TRUE(derived.starts_with("kvt-")) << derived;
  EXPECT_EQ(derived.find("key-b"), std::string::npos);  // the key never travels in a body
  EXPECT_EQ(derived, salts.SaltForTenant("key-b"));
  EXPECT_NE(derived, salts.SaltForTenant("key-c"));
  // Another secret derives other salts.
  c.secret = "other";
  EXPECT_NE(TenantSalts(c).SaltForTenant("key-b"), derived);
  EXPECT_EQ(salts.SaltFor(net::HttpRequest{}), "");  // no tenant, no salt
}

TEST(TenancyTest, AHeaderNamesTheTenantAndUnlistedNoneGivesNoSalt) {
  TenancyConfig c;
  c.from = "header";
  c.header = "X-Tenant-Id";
  c.salts = {{"acme", "salt-acme"}};
  c.unlisted = "none";
  TenantSalts salts(c);
  EXPECT_EQ(salts.SaltFor(WithHeader("x-tenant-id", "acme")), "salt-acme");
  EXPECT_EQ(salts.SaltFor(WithHeader("x-tenant-id", "globex")), "");
}

TEST(TenancyTest, CombinedSaltsOfTwoTenantsNeverCollide) {
  EXPECT_EQ(CombineSalts("", ""), "");
  EXPECT_EQ(CombineSalts("", "client"), "0::client");
  EXPECT_EQ(CombineSalts("t", ""), "1:t");
  EXPECT_EQ(CombineSalts("t", "c"), "1:t:c");
  // A tenant "s" whose client sends "x" and a tenant "s:x": told apart by the length.
  EXPECT_NE(CombineSalts("s", "x"), CombineSalts("s:x", ""));
  EXPECT_NE(CombineSalts("1:s", ""), CombineSalts("s", ""));
  // A client cannot make its string another tenant's by sending a crafted salt.
  EXPECT_NE(CombineSalts("a", "1:b"), CombineSalts("b", ""));
  // Nor can a request without a tenant, sending a tenant's combined string.
  EXPECT_NE(CombineSalts("", CombineSalts("b", "")), CombineSalts("b", ""));
}

TEST(TenancyTest, ConfigIsParsedAndValidated) {
  auto c = ParseConfig(R"(
workers: [{name: w, url: "http://127.0.0.1:1", model: m}]
tenancy:
  from: header
  header: X-Tenant
  salts: {acme: salt-acme}
  unlisted: none
)");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->tenancy.from, "header");
  EXPECT_EQ(c->tenancy.salts.at("acme"), "salt-acme");
  EXPECT_TRUE(Validate(*c).has_value());
  c->tenancy.from = "cookie";
  EXPECT_FALSE(Validate(*c).has_value());
  c->tenancy.from = "header";
  c->tenancy.header.clear();
  EXPECT_FALSE(Validate(*c).has_value());
  // Neither tenants (maybe API keys) nor salts are printed.
  c->tenancy.header = "X-Tenant";
  const std::string yaml = EffectiveYaml(*c);
  EXPECT_EQ(yaml.find("acme"), std::string::npos) << yaml;
  auto bad = ParseConfig(
      "workers: [{name: w, url: \"http://127.0.0.1:1\", model: m}]\n"
      "tenancy: {form: header}\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().find("tenancy.form: unknown key"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace kvroute::gateway
