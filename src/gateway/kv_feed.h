// KvFeed: connects every worker's KV event stream to the global index. For each worker with a
// KV-event endpoint it runs one kv::ZmqEventSubscriber (endpoint and bind/connect mode from
// kv::SubscriberEndpointFor, replay endpoint from kv::ReplayEndpointFor) and maps
//   batch   → kv::KvIndex::ApplyBatch(worker, seq)   (and records event lag = wall now − ts)
//   restart → kv::KvIndex::RemoveWorker(worker)      (the engine's cache is empty again)
//   stale   → kv::KvIndex::MarkStale / ClearStale    (events lost / view complete again)
// A worker the index already holds with an applied sequence S (merged from a sibling's
// snapshot just before AddWorker: gateway/replica_warm.h) is subscribed with resume_after = S,
// so its first gap repair asks the replay socket for S + 1 onwards, and the index skips any
// batch <= S: no block of the image counts twice.
// Lag uses wall-clock seconds because vLLM stamps batches with time.time(); the wall clock is
// injectable for tests.
//
// Ownership: owns the subscribers; borrows the index (must outlive the feed).
// Thread safety: AddWorker/RemoveWorker/Counters from any thread (one mutex); the subscriber
// callbacks run on their own threads and touch only the index (thread-safe) and per-worker
// atomics.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"
#include "kv/index/index.h"
#include "kv/wire/zmq_subscriber.h"

namespace kvroute::gateway {

// A worker's KV event configuration, as the engine itself was configured
// (vLLM --kv-events-config endpoint / replay_endpoint / topic).
struct KvEventSpec {
  std::string endpoint;         // engine's endpoint, e.g. "tcp://*:5557"
  std::string replay_endpoint;  // engine's replay ROUTER; empty: none
  std::string topic;            // subscription prefix; empty: all
  bool operator==(const KvEventSpec&) const = default;
};

struct KvFeedOptions {
  std::chrono::milliseconds poll_interval{50};
  std::chrono::milliseconds replay_timeout{1000};
  // Wall-clock seconds (as batch ts). Default: std::chrono::system_clock.
  std::function<double()> wall_clock_s;
};

struct KvFeedCounters {
  std::uint64_t batches = 0;
  std::uint64_t events = 0;
  std::uint64_t blocks_stored = 0;    // blocks in BlockStored events (any tier)
  std::uint32_t last_block_size = 0;  // of the last BlockStored (0: none yet)
  std::uint64_t restarts = 0;
  std::uint64_t stale_episodes = 0;
  std::uint64_t resyncs = 0;  // stale → fresh transitions
  bool stale = false;
  double last_lag_s = 0;  // wall now − ts of the last batch (0 before the first)
  double max_lag_s = 0;
  kv::ZmqSubscriberStats subscriber;  // the subscriber's own counters
};

class KvFeed {
 public:
  KvFeed(kv::KvIndex* index, KvFeedOptions options = {});
  ~KvFeed();  // stops every subscriber
  KvFeed(const KvFeed&) = delete;
  KvFeed& operator=(const KvFeed&) = delete;

  // Starts the subscriber of `worker` (replacing an existing one). `engine_host` replaces a
  // wildcard host in the engine's endpoints (the host part of the worker's base URL).
  std::expected<void, std::string> AddWorker(WorkerId worker, const KvEventSpec& spec,
                                             std::string_view engine_host);
  // Stops the subscriber and forgets the worker in the index.
  void RemoveWorker(WorkerId worker);

  // The subscriber's endpoint as bound/connected (wildcard port resolved), if running.
  std::optional<std::string> Endpoint(WorkerId worker) const;
  std::optional<KvFeedCounters> Counters(WorkerId worker) const;
  std::map<WorkerId, KvFeedCounters> AllCounters() const;

 private:
  struct Feed;  // subscriber + atomics; defined in kv_feed.cc
  kv::KvIndex* const index_;
  const KvFeedOptions options_;
  mutable std::mutex mu_;
  std::map<WorkerId, std::unique_ptr<Feed>> feeds_;  // guarded by mu_
};

}  // namespace kvroute::gateway
