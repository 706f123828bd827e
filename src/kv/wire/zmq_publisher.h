// ZmqEventPublisher: publishes KV event batches the way vLLM's ZmqEventPublisher does
// (shared/reference/vllm-protocol.md §1.2–1.3), for `kvroute sim` and the wire tests.
//
//   PUB socket     3-frame messages [topic, seq (8 B big-endian, from 0), msgpack payload];
//                  bound or connected by vLLM's rule (EngineBindsEndpoint below).
//   ROUTER socket  optional, always bound: a request [identity, "", start_seq (8 B BE)] gets
//                  every buffered batch with seq >= start_seq as [identity, "", seq, payload],
//                  then the end marker [identity, "", FF×8, ""]. The last `buffer_steps`
//                  batches are kept.
//
// Publish() never blocks the engine: it moves the batch into a bounded in-process queue that a
// background thread drains (encoding, sending and serving replay requests); when the queue is
// full the batch is dropped and counted. Dropped batches take no sequence number, exactly as a
// batch vLLM never enqueued (subscribers cannot see such a loss; it is counted here).
//
// Ownership: owns its ZMQ context, sockets and thread. Shutdown() (also run by the
// destructor) stops accepting, flushes what is queued for at most `shutdown_timeout`, and
// joins the thread.
// Thread safety: Publish(), stats() and the endpoint accessors may be called from any thread;
// Shutdown() from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "kv/wire/event_encode.h"
#include "kv/kv_event.h"

namespace kvroute::kv {

// vLLM's bind-or-connect rule for the engine side: bind if the endpoint contains '*' or "::"
// or starts with ipc:// or inproc://; otherwise connect.
bool EngineBindsEndpoint(std::string_view endpoint);

// The sequence value of the replay end marker (-1 as a signed 8-byte big-endian integer).
inline constexpr std::uint64_t kReplayEndSeq = ~std::uint64_t{0};

// Defaults are those of vLLM's kv_events_config.
struct ZmqPublisherOptions {
  std::string endpoint = "tcp://*:5557";
  // Empty: no replay socket. Use "tcp://127.0.0.1:*" for an OS-chosen port.
  std::string replay_endpoint;
  std::size_t buffer_steps = 10000;  // batches kept for replay
  int hwm = 100000;                  // ZMQ send high-water mark of the PUB socket
  std::size_t max_queue_size = 100000;
  std::string topic;
  EncodeOptions encode;
  std::chrono::milliseconds shutdown_timeout{1000};  // vLLM's SHUTDOWN_TIMEOUT
  // Test hook: when it returns true for a sequence number, that batch is not sent on the PUB
  // socket but is still numbered and kept for replay (simulates a message lost in transit).
  std::function<bool(std::uint64_t seq)> drop_on_wire_for_test;
};

struct ZmqPublisherStats {
  std::uint64_t published = 0;  // batches numbered (sent, or lost on purpose by the test hook)
  std::uint64_t dropped_queue_full = 0;
  std::uint64_t replay_requests = 0;
  std::uint64_t send_errors = 0;
};

class ZmqEventPublisher {
 public:
  // Creates the sockets (bind/connect happen here, so errors surface now) and starts the
  // thread. The error is a human-readable description.
  static std::expected<std::unique_ptr<ZmqEventPublisher>, std::string> Create(
      ZmqPublisherOptions options);

  ~ZmqEventPublisher();
  ZmqEventPublisher(const ZmqEventPublisher&) = delete;
  ZmqEventPublisher& operator=(const ZmqEventPublisher&) = delete;

  // Queues a batch; false if it was dropped (queue full or shut down). Stamps
  // data_parallel_rank with 0 when unset, as vLLM's publish() does for rank 0. Never blocks
  // on I/O.
  bool Publish(KvEventBatch batch);

  // Stops, flushing what is queued within options.shutdown_timeout. Idempotent.
  void Shutdown();

  // The endpoints as bound (wildcard ports resolved) or as connected.
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }

  ZmqPublisherStats stats() const;

 private:
  struct Impl;
  explicit ZmqEventPublisher(std::unique_ptr<Impl> impl);
  void Run();

  std::unique_ptr<Impl> impl_;  // sockets and replay buffer: publisher thread only
  std::string endpoint_;
  std::string replay_endpoint_;
  std::size_t max_queue_size_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<KvEventBatch> queue_;  // guarded by mu_
  bool stopping_ = false;           // guarded by mu_

  std::atomic<std::uint64_t> published_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> replay_requests_{0};
  std::atomic<std::uint64_t> send_errors_{0};
  std::thread thread_;
};

}  // namespace kvroute::kv
