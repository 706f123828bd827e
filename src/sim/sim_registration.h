// The sim's etcd registration (`kvroute sim --etcd`): the WorkerRecord describing this server
// (docs/etcd.md), and the shutdown order a launcher or sidecar of a real engine follows:
//
//   start    register (lease of --etcd-ttl, kept alive every TTL/3) once the server listens
//   SIGTERM  put draining: true → wait --etcd-drain-delay (routers watching the prefix stop
//            sending; requests still arriving are served) → the server stops accepting and
//            drains (--shutdown-timeout) → revoke the lease (the key goes at once)
//   kill -9  nothing: the key expires with the lease after the TTL
//
// Ownership: the registrar owns its etcd client and registration. Thread safety: Start /
// SetDraining / Stop from the command's main thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>

#include "etcd/worker_record.h"
#include "sim/sim_config.h"

namespace kvroute::etcd {
class EtcdClient;
class Registration;
}  // namespace kvroute::etcd

namespace kvroute::sim {

class SimServer;

struct SimEtcdOptions {
  std::string endpoints;  // "http://127.0.0.1:2379,..."; empty: no registration
  std::string prefix{etcd::kDefaultWorkerPrefix};
  std::int64_t ttl_s = 10;
  std::string name;            // empty: "sim-<port>"
  std::string advertise_url;   // empty: http://<host>:<port> (127.0.0.1 for a wildcard host)
  double drain_delay_s = 1.0;  // between draining: true and refusing new connections
};

// The record of a started server. `profile_tp` is the profile's tensor-parallel degree.
etcd::WorkerRecord SimWorkerRecord(const SimConfig& config, const SimServer& server,
                                   const SimEtcdOptions& options, std::uint32_t profile_tp);

class SimRegistrar {
 public:
  static std::expected<std::unique_ptr<SimRegistrar>, std::string> Create(SimEtcdOptions options,
                                                                          etcd::WorkerRecord record);
  ~SimRegistrar();
  // Registers (the first attempt on this thread; if etcd is down it keeps trying).
  void Start();
  // Puts draining: true, then waits drain_delay_s.
  void SetDraining();
  void Stop();  // revokes the lease
  const std::string& key() const { return key_; }

 private:
  SimRegistrar() = default;
  SimEtcdOptions options_;
  etcd::WorkerRecord record_;
  std::string key_;
  std::unique_ptr<etcd::EtcdClient> client_;
  std::unique_ptr<etcd::Registration> registration_;
};

}  // namespace kvroute::sim
