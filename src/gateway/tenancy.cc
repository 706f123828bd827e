#include "gateway/tenancy.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace kvroute::gateway {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// "kvt-" and the first 128 bits of SHA-256(secret ‖ 0x00 ‖ tenant), in hex.
std::string DerivedSalt(std::string_view secret, std::string_view tenant) {
  std::string material(secret);
  material.push_back('\0');
  material.append(tenant);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(material.data(), material.size(), digest, &len, EVP_sha256(), nullptr);
  std::string out = "kvt-";
  char hex[3];
  for (unsigned int i = 0; i < 16 && i < len; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    out.append(hex, 2);
  }
  return out;
}

}  // namespace

TenantSalts::TenantSalts(TenancyConfig config)
    : config_(std::move(config)), header_lower_(Lower(config_.header)) {}

std::string TenantSalts::SaltForTenant(std::string_view tenant) const {
  if (!enabled() || tenant.empty()) return {};
  if (auto it = config_.salts.find(std::string(tenant)); it != config_.salts.end()) {
    return it->second;
  }
  if (config_.unlisted == "derive") return DerivedSalt(config_.secret, tenant);
  return {};
}

std::string TenantSalts::SaltFor(const net::HttpRequest& request) const {
  if (!enabled()) return {};
  std::string_view tenant;
  if (config_.from == "api_key") {
    constexpr std::string_view kBearer = "Bearer ";
    std::string_view auth = request.Header("authorization");
    if (auth.starts_with(kBearer)) {
      tenant = auth.substr(kBearer.size());
    } else {
      tenant = request.Header("x-api-key");
    }
  } else if (config_.from == "header") {
    tenant = request.Header(header_lower_);
  }
  return SaltForTenant(tenant);
}

std::string CombineSalts(std::string_view tenant_salt, std::string_view client_salt) {
  if (tenant_salt.empty() && client_salt.empty()) return {};
  // "<length of the tenant salt>:<tenant salt>[:<client salt>]": the length fixes where the
  // tenant's part ends, so no client salt can make one tenant's string another's; without a
  // tenant, "0::<client salt>", which no tenant's string is.
  std::string out = std::to_string(tenant_salt.size());
  out.push_back(':');
  out.append(tenant_salt);
  if (!client_salt.empty()) {
    out.push_back(':');
    out.append(client_salt);
  }
  return out;
}

}  // namespace kvroute::gateway
