// PrefixWatcher: follows every key under a prefix and reports each change once, surviving
// dropped watches, etcd restarts and compaction — the discovery side of docs/etcd.md.
//
//   1. range the prefix; report what changed against what it already knew (first time: every
//      key is a put); remember the range's revision R
//   2. watch from R + 1; each event updates the known keys and R = its mod_revision
//   3. stream broken / etcd unreachable / idle: retry with backoff (250 ms doubling to
//      `max_backoff`), re-watch from R + 1 — nothing in the gap is missed, nothing repeated
//   4. the watch answers "compacted" (R + 1 is gone from etcd's history): back to 1; the diff
//      against the known keys turns what happened in the gap into puts and deletes
// Callbacks: on_put(kv) for a new key or a changed value; on_delete(key) for a key that left
// (deleted, or its lease expired). Both run on the watcher's thread (the first listing on
// Start's), one at a time, never under the watcher's lock.
//
// Ownership: borrows the client. Thread safety: Start/Stop from one thread; status() any.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "etcd/client.h"

namespace kvroute::etcd {

struct WatcherOptions {
  std::string prefix;
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{5'000};
};

struct WatcherStatus {
  bool connected = false;     // the last call to etcd succeeded / the watch is open
  std::int64_t revision = 0;  // the last revision seen (range or event)
  std::uint64_t failures = 0;  // failed ranges, watches and broken streams
  std::uint64_t relists = 0;   // ranges after the first (compaction, or start failed)
  std::uint64_t events = 0;
  std::string last_error;
};

class PrefixWatcher {
 public:
  using PutFn = std::function<void(const KeyValue&)>;
  using DeleteFn = std::function<void(const std::string& key)>;

  PrefixWatcher(EtcdClient* client, WatcherOptions options, PutFn on_put, DeleteFn on_delete);
  ~PrefixWatcher();  // Stop()
  PrefixWatcher(const PrefixWatcher&) = delete;
  PrefixWatcher& operator=(const PrefixWatcher&) = delete;

  // Lists the prefix once on this thread (callbacks for every key), then starts the thread.
  // If etcd did not answer, the thread keeps trying; the error is returned for the log.
  Result<void> Start();
  void Stop();
  WatcherStatus status() const;

 private:
  Result<void> List();                 // step 1
  bool WatchOnce();                    // steps 2-4; false: relist first
  void Loop();
  void Fail(const Error& error);
  bool Sleep(std::chrono::milliseconds d);  // false if stopping

  EtcdClient* const client_;
  const WatcherOptions options_;
  const PutFn on_put_;
  const DeleteFn on_delete_;
  std::map<std::string, std::int64_t> known_;  // key → mod_revision; watcher thread only
  bool listed_ = false;                         // watcher thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;
  WatcherStatus status_;          // guarded by mu_
  bool stop_ = false;             // guarded by mu_
  Watch* current_ = nullptr;      // guarded by mu_: cancelled by Stop
  bool warned_ = false;           // guarded by mu_
  std::thread thread_;
};

}  // namespace kvroute::etcd
