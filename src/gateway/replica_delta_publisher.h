// DeltaPublisher: this replica's side of the delta stream (docs/replicas.md): it hears every
// local booking call (a fleet::BookingListener on the RouterState) and every prefix recorded
// as predicted (OnPredicted, from the pipeline), and streams them, batched, to each sibling
// subscribed through GET /admin/replica/deltas.
//
//   booking calls ──▶ live table (id → booked delta) + pending bytes ──flusher──▶ frame
//                                                                     └─▶ each subscriber's
//                                                                         net::ChunkQueue
//
// - Only local bookings are published: remote ones (IsRemoteBookingId) and ids it never saw
//   booked are ignored, so nothing is echoed back to the sibling it came from.
// - A frame is sent `flush_interval` after the first pending delta, or at once when
//   `max_pending` are pending; an empty frame (heartbeat) after `heartbeat` of silence.
// - Subscribe: hello, then one booked delta per request in flight (with its first-token
//   flag), then every later frame, under the mutex that orders deltas: a new subscriber
//   misses nothing and gets nothing twice.
// - Nothing is buffered while no sibling is subscribed (the live table is kept).
// - A subscriber `max_buffered_bytes` behind is cut by its queue (it reconnects from a fresh
//   replay); Stop ends every stream (the siblings drop this replica's bookings).
//
// Ownership: borrows the RouterState (names of workers), which must outlive it; owns the
// flusher thread. Thread safety: the listener calls, OnPredicted, Subscribe and subscribers()
// from any thread (one mutex); Start/Stop from one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/types.h"
#include "fleet/router_state.h"
#include "gateway/replica_delta_codec.h"
#include "kv/keys/block_key.h"
#include "net/body_queue.h"

namespace kvroute::gateway {

struct DeltaPublisherOptions {
  std::chrono::microseconds flush_interval{20'000};  // replicas.delta_flush_ms
  std::size_t max_pending = 64;                     // deltas that force a flush at once
  std::chrono::milliseconds heartbeat{250};         // an empty frame after this much silence
  std::size_t max_buffered_bytes = 8u << 20;        // per subscriber, then it is cut
};

class DeltaPublisher final : public fleet::BookingListener {
 public:
  DeltaPublisher(DeltaPublisherOptions options, const fleet::RouterState* state,
                 std::uint64_t instance);
  ~DeltaPublisher() override;  // Stop
  DeltaPublisher(const DeltaPublisher&) = delete;
  DeltaPublisher& operator=(const DeltaPublisher&) = delete;

  void Start();  // the flusher thread
  void Stop();   // ends every stream and joins the flusher; idempotent

  // fleet::BookingListener.
  void OnBooked(RequestId id, const fleet::RoutedRequest& booking) override;
  void OnFirstToken(RequestId id) override;
  void OnReleased(RequestId id) override;
  // The pipeline recorded `keys` as predicted on `worker`.
  void OnPredicted(WorkerId worker, std::span<const kv::BlockKey> keys);

  // A new sibling's stream (the body of GET /admin/replica/deltas); closed already after Stop.
  std::shared_ptr<net::ChunkQueue> Subscribe();

  std::size_t subscribers() const;
  std::size_t live() const;  // local bookings in flight
  std::uint64_t instance() const { return instance_; }

 private:
  std::optional<std::string> NameOf(WorkerId worker) const;
  void AppendLocked(const Delta& delta);  // REQUIRES: mu_ held
  void FlushLocked();                     // REQUIRES: mu_ held
  void Run();

  const DeltaPublisherOptions options_;
  const fleet::RouterState* const state_;
  const std::uint64_t instance_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<RequestId, BookedDelta> live_;           // guarded by mu_
  std::vector<std::shared_ptr<net::ChunkQueue>> queues_;      // guarded by mu_
  std::string pending_;                                       // guarded by mu_
  std::size_t pending_count_ = 0;                             // guarded by mu_
  std::chrono::steady_clock::time_point last_frame_;          // guarded by mu_
  bool stop_ = false;                                         // guarded by mu_
  std::thread flusher_;
};

// A random 64-bit instance id (never 0): what tells a replica's lives apart.
std::uint64_t NewReplicaInstanceId();

}  // namespace kvroute::gateway
