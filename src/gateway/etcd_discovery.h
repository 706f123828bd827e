// EtcdDiscovery: `kvroute serve --etcd` — follows the worker records under a prefix
// (docs/etcd.md) and turns each change into a membership call on the running gateway:
//
//   new key, valid record            join (subscribe to its KV events, seed its rates, health
//                                    checks, catalog); then drain if the record says draining
//   record changes draining → true   drain: no new requests from this moment; in-flight finish
//   record changes otherwise         leave, then join with the new record (a new incarnation)
//   key deleted / lease expired      leave: its in-flight requests finish or fail as a dead
//                                    worker's do
//   malformed record                 skipped with a warning naming the key (a worker already
//                                    joined from that key keeps its last good record)
//   etcd unreachable                 nothing changes: the last known fleet keeps serving and
//                                    being health-checked; the watcher retries with backoff
//                                    (etcd/prefix_watcher.h) and catches up when etcd is back
//
// Ownership: owns its etcd client and watcher; the membership callbacks must outlive it.
// Thread safety: Start/Stop from one thread; the callbacks run on the watcher's thread (the
// first listing on Start's) one at a time; status() from any thread.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/prefix_watcher.h"
#include "etcd/worker_record.h"
#include "fleet/worker_spec.h"

namespace kvroute::etcd {
class EtcdClient;
}

namespace kvroute::gateway {

// What discovery may do to the fleet: Gateway::JoinWorker / DrainWorker / LeaveWorker.
struct MembershipCalls {
  std::function<std::expected<void, std::string>(fleet::WorkerSpec)> join;
  std::function<bool(std::string_view)> drain;
  std::function<bool(std::string_view)> leave;
};

struct EtcdDiscoveryOptions {
  std::vector<std::string> endpoints;
  std::string prefix{etcd::kDefaultWorkerPrefix};
  std::uint32_t block_size = 16;  // the router's: every joined worker's spec gets it
};

struct EtcdDiscoveryStatus {
  etcd::WatcherStatus watch;
  std::uint64_t malformed = 0;  // records skipped
  std::uint64_t refused = 0;    // valid records the gateway refused to join (name taken, ...)
  std::size_t workers = 0;      // workers joined from etcd now
};

class EtcdDiscovery {
 public:
  static std::expected<std::unique_ptr<EtcdDiscovery>, std::string> Create(
      EtcdDiscoveryOptions options, MembershipCalls calls);
  ~EtcdDiscovery();
  EtcdDiscovery(const EtcdDiscovery&) = delete;
  EtcdDiscovery& operator=(const EtcdDiscovery&) = delete;

  // Lists the prefix (joining what it finds) before returning, then watches. etcd down at
  // start is logged, not fatal: the watcher keeps trying.
  void Start();
  void Stop();
  EtcdDiscoveryStatus status() const;

 private:
  EtcdDiscovery() = default;
  void OnPut(const etcd::KeyValue& kv);
  void OnDelete(const std::string& key);
  void JoinFrom(const std::string& key, const etcd::WorkerRecord& record);

  EtcdDiscoveryOptions options_;
  MembershipCalls calls_;
  std::unique_ptr<etcd::EtcdClient> client_;
  std::unique_ptr<etcd::PrefixWatcher> watcher_;
  struct Known {
    etcd::WorkerRecord record;
    bool joined = false;
  };
  mutable std::mutex mu_;
  std::map<std::string, Known> known_;  // key → last good record; guarded by mu_
  std::uint64_t malformed_ = 0;         // guarded by mu_
  std::uint64_t refused_ = 0;           // guarded by mu_
};

}  // namespace kvroute::gateway
