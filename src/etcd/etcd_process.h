// EtcdProcess (tests only): a real etcd (/usr/bin/etcd, Debian's etcd-server) on loopback, on
// free ports, with a temporary data dir; stopped by its pid. Restart keeps the data dir and
// the ports, as an operator restarting etcd would.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace kvroute::etcd::testing {

inline constexpr const char* kEtcdBinary = "/usr/bin/etcd";

class EtcdProcess {
 public:
  EtcdProcess();
  ~EtcdProcess();  // stops etcd and removes the data dir
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  static bool Available();  // the binary exists
  // Starts etcd and waits (≤ 15 s) until it answers a range. False with the log tail in
  // `error` otherwise.
  bool Start(std::string* error);
  void Stop();      // SIGTERM, wait
  void Kill();      // SIGKILL, wait
  std::string endpoint() const;  // "http://127.0.0.1:PORT"
  std::uint16_t client_port() const { return client_port_; }

 private:
  std::string dir_;
  std::uint16_t client_port_ = 0;
  std::uint16_t peer_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace kvroute::etcd::testing
