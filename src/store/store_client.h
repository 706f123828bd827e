// HttpSharedStore: a `kvroute sim`'s SharedKvStore — the engine's match and put calls sent to
// a `kvroute store` over HTTP/1.1 (store_wire.h), loopback or a cluster network.
//
//   Match  synchronous on the engine thread, bounded by `timeout` (default 200 ms): the
//          request cannot be scheduled before it knows its prefix. A store that is down or
//          slow answers 0 (a miss: the engine recomputes), counted in `match_failures`.
//   Lease  synchronous on the engine thread (as Match, within `timeout`), when a request
//          arrives; a failure is no lease (counted in `lease_failures`): the request may then
//          find fewer blocks than the router credited, never more.
//   Release and
//   Put    fire-and-forget: queued (bounded, `max_queued_puts` batches; a full queue drops
//          the batch, counted) and sent by the client's own thread, so a slow store never
//          stalls the step loop (vLLM's connector stores asynchronously too).
//
// Bytes are not sent: a block's load time is the engine model's (EngineConfig::shared
// bandwidth and latency); `size_bytes` tells the store how much room the block takes.
//
// Ownership: owns its HTTP client and thread. Thread safety: Match and Put from one thread
// (the engine's); counters from any.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/shared_tier.h"

namespace kvroute::client {
class BlockingHttpClient;
}

namespace kvroute::store {

struct HttpSharedStoreOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8200;
  std::uint32_t block_size = 16;
  double block_bytes = 0;  // room one block takes in the store
  std::chrono::milliseconds timeout{200};
  std::size_t max_queued_puts = 1024;
};

struct HttpSharedStoreCounters {
  std::uint64_t matches = 0;
  std::uint64_t match_failures = 0;
  std::uint64_t put_batches = 0;
  std::uint64_t put_failures = 0;
  std::uint64_t puts_dropped = 0;  // batches dropped: queue full (puts and releases)
  std::uint64_t leases = 0;        // leases granted
  std::uint64_t lease_failures = 0;
};

class HttpSharedStore : public engine::SharedKvStore {
 public:
  explicit HttpSharedStore(HttpSharedStoreOptions options);
  ~HttpSharedStore() override;  // sends what is queued (each within the timeout), then stops

  std::size_t Match(std::span<const kv::EngineHash> hashes, Nanos now) override;
  void Put(std::span<const engine::BlockMeta> blocks, Nanos now) override;
  std::uint64_t Lease(std::span<const kv::EngineHash> hashes, Nanos now) override;
  void Release(std::uint64_t lease_id, Nanos now) override;

  HttpSharedStoreCounters counters() const;

 private:
  void Run();
  // Queues one fire-and-forget POST for the sender thread; false when the queue is full.
  bool Enqueue(std::string target, std::string body);

  HttpSharedStoreOptions options_;
  std::unique_ptr<client::BlockingHttpClient> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Queued {
    std::string target;  // /v1/kv/put or /v1/kv/release
    std::string body;
  };
  std::deque<Queued> queue_;  // guarded by mu_
  bool stopping_ = false;          // guarded by mu_
  std::atomic<std::uint64_t> matches_{0}, match_failures_{0}, put_batches_{0}, put_failures_{0},
      puts_dropped_{0}, leases_{0}, lease_failures_{0};
  std::thread thread_;
};

}  // namespace kvroute::store
