// Tenancy: which tenant a request belongs to, and the cache_salt kvroute adds for it, so that
// tenants never share prefix cache on the engines and are never credited with each other's
// blocks by the router (vLLM keys block 0 with the salt; kvroute keys it the same way, see
// kv/keys/extra_keys.h). Prefix-cache timing is a side channel between tenants: `cache_salt` is
// what closes it, and the router must not reopen it.
//
//   tenancy.from: none      no tenant salt (a client's own cache_salt is forwarded as is)
//                 api_key   the tenant is the request's API key ("Authorization: Bearer K",
//                           or the Messages API's "x-api-key: K")
//                 header    the tenant is the value of tenancy.header
//   tenancy.salts           tenant -> cache_salt; a tenant not listed gets, per
//   tenancy.unlisted        derive: a salt derived from it (SHA-256 of tenancy.secret and the
//                           tenant, so an API key never travels in a body) | none: no salt
//
// A request with no tenant (no key, no header) gets no tenant salt. With tenancy on, the
// forwarded body's cache_salt is CombineSalts(tenant salt, the client's own cache_salt): a
// client can still partition its own cache, but never reach another tenant's — not even by
// sending a tenant's salt, or a combined string, as its own.
//
// Thread safety: immutable after construction.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "gateway/config.h"
#include "net/http_types.h"

namespace kvroute::gateway {

class TenantSalts {
 public:
  TenantSalts() = default;
  explicit TenantSalts(TenancyConfig config);

  bool enabled() const { return config_.from != "none"; }
  // The tenant salt of a request with these headers; empty when none applies.
  std::string SaltFor(const net::HttpRequest& request) const;
  // The same for a tenant id found by the caller (empty: no tenant).
  std::string SaltForTenant(std::string_view tenant) const;

 private:
  TenancyConfig config_;
  std::string header_lower_;
};

// The cache_salt forwarded (tenancy on) for a tenant salt and a client's own (either may be
// empty; the result is empty only when both are). Injective in the pair: two tenants' salts
// never combine to the same string, whatever their clients send.
std::string CombineSalts(std::string_view tenant_salt, std::string_view client_salt);

}  // namespace kvroute::gateway
