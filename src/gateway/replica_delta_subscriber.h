// DeltaSubscribers: this replica's subscriptions to its siblings' delta streams
// (docs/replicas.md). Every second it lists the siblings (replicas.warm_from plus those
// registered under replicas.etcd_prefix) and keeps one connection to each, a thread apiece:
//
//   GET <sibling>/admin/replica/deltas ─▶ FrameDecoder ─▶ RemoteBookings::Apply(instance, …)
//
// - The first delta must be the sibling's hello. Our own instance id there (our own URL in
//   the list): the URL is marked as ourselves and never asked again. An instance that is
//   already connected under another URL: closed, asked again later.
// - The stream ends (EOF, reset, 2 s without a byte although the sibling sends a heartbeat
//   every 250 ms, a malformed frame): RemoteBookings::DropSource at once, then reconnect
//   with backoff (0.2 s doubling to 2 s) while the URL is still listed.
// - Each round also expires remote bookings older than their TTL.
//
// Ownership: borrows the RemoteBookings and the clock (they outlive it); owns its threads and
// one blocking HTTP client. Thread safety: Start/Stop from one thread; peers() and
// the list function's callers are internal; `list` runs on the manager thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gateway/replica_remote_bookings.h"

namespace kvroute::client {
class BlockingHttpClient;
class BlockingStream;
}  // namespace kvroute::client

namespace kvroute::gateway {

struct DeltaSubscriberOptions {
  // The siblings' base URLs now; called once per round on the manager thread.
  std::function<std::vector<std::string>()> list;
  std::uint64_t own_instance = 0;
  std::string api_key;  // bearer for their /admin (empty: none)
  std::chrono::milliseconds round{1'000};
  std::chrono::milliseconds idle_timeout{2'000};  // no byte for this long: the stream is dead
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds min_backoff{200};
  std::chrono::milliseconds max_backoff{2'000};
};

class DeltaSubscribers {
 public:
  DeltaSubscribers(DeltaSubscriberOptions options, RemoteBookings* remote, const Clock* clock);
  ~DeltaSubscribers();  // Stop
  DeltaSubscribers(const DeltaSubscribers&) = delete;
  DeltaSubscribers& operator=(const DeltaSubscribers&) = delete;

  void Start();
  void Stop();  // cancels every stream, joins every thread; idempotent

  std::size_t peers() const;  // siblings whose stream is up
  std::uint64_t received() const { return received_.load(); }  // deltas applied

 private:
  struct Conn {
    std::string url;
    std::thread thread;
    std::atomic<bool> finished{false};
    std::mutex mu;                                // guards stream
    std::unique_ptr<client::BlockingStream> stream;
  };
  void Manage();
  void Follow(Conn* conn);  // the connection thread
  // One stream's life; returns after it ended. Sets *self when the sibling is us.
  void FollowOnce(Conn* conn, bool* self, bool* duplicate, bool* was_up);
  bool Listed(const std::string& url) const;
  bool SleepFor(std::chrono::milliseconds d);  // false when stopping

  const DeltaSubscriberOptions options_;
  RemoteBookings* const remote_;
  const Clock* const clock_;
  std::unique_ptr<client::BlockingHttpClient> http_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                                 // guarded by mu_
  std::vector<std::string> listed_;                   // guarded by mu_
  std::set<std::string> self_urls_;                   // guarded by mu_
  std::set<std::uint64_t> connected_;                 // guarded by mu_: instances up
  std::map<std::string, std::unique_ptr<Conn>> conns_;  // guarded by mu_
  std::atomic<std::uint64_t> received_{0};
  std::thread manager_;
};

}  // namespace kvroute::gateway
