// ReplicaRegistry: kvroute replicas finding each other in etcd (replicas.etcd_prefix), so a
// replica that starts late or restarts knows whom to warm its index from without a list in
// its config. Each ready replica holds one key under a lease:
//
//   <prefix><host:port>  =  {"url": "http://host:port"}     (TTL 10 s, keepalive every TTL/3)
//
//   Start (before the index warms)  Siblings(): every URL under the prefix — tried after
//                                   replicas.warm_from; a stale key of this replica's own
//                                   earlier life is refused (it does not listen yet)
//   end of Start (it listens)       Register(url): the key appears
//   Drain / Stop                    Withdraw(): the lease is revoked, the key goes at once,
//                                   so no replica warms from one that is leaving
//   kill -9                         the key expires with the lease
//
// etcd unreachable at start: no siblings (a warning; warm_from still applies); the
// registration keeps retrying in the background (etcd/registration.h).
//
// Ownership: owns its etcd client and registration. Thread safety: one caller at a time
// (Start's thread; Drain's withdraw thread, which Stop joins before its own Withdraw).
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/client.h"
#include "etcd/registration.h"

namespace kvroute::gateway {

class ReplicaRegistry {
 public:
  static std::expected<std::unique_ptr<ReplicaRegistry>, std::string> Create(
      const std::vector<std::string>& etcd_endpoints, std::string prefix);
  ~ReplicaRegistry();
  ReplicaRegistry(const ReplicaRegistry&) = delete;
  ReplicaRegistry& operator=(const ReplicaRegistry&) = delete;

  std::vector<std::string> Siblings();
  // The same, with etcd's failure as an error instead of an empty list (and no warning): the
  // delta subscribers keep their last list while etcd is away.
  std::expected<std::vector<std::string>, std::string> TryList();
  void Register(const std::string& url);
  void Withdraw();

 private:
  ReplicaRegistry(std::unique_ptr<etcd::EtcdClient> client, std::string prefix);

  std::unique_ptr<etcd::EtcdClient> client_;
  const std::string prefix_;
  std::unique_ptr<etcd::Registration> registration_;  // set by Register
};

// What this replica registers: `configured` (replicas.advertise_url), else
// http://<host>:<port> of its listener (IPv6 hosts in brackets).
std::string AdvertiseUrl(const std::string& configured, const std::string& host,
                         std::uint16_t port);

// The sibling URL in a registry value ({"url": ...}); nullopt when it is not one.
std::optional<std::string> ReplicaUrlOf(std::string_view value);

}  // namespace kvroute::gateway
