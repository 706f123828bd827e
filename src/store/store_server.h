// StoreServer: `kvroute store`, the cluster's shared KV store as a process. It holds the shared
// tier's metadata (StoreCore: LRU capacity, idle TTL), answers the sims' match and put calls
// over HTTP/1.1 (store_wire.h), and publishes its own KV events (medium "SHARED") on ZMQ with
// the same envelope, sequence numbers and replay socket as an engine (kv::ZmqEventPublisher),
// so the router subscribes to it like one more engine and indexes the shared tier once for all
// workers. Its first batch is AllBlocksCleared: a router that still holds entries from an
// earlier life of the store drops them (a restart also resets the sequence, which the
// router's subscriber treats as an engine restart: it forgets the store's entries).
//
// The TTL is enforced on every call and by a sweeper thread (`sweep_interval`), so idle
// blocks expire (BlockRemoved) even when no sim calls; an interval without any batch sends an
// empty one (a heartbeat), so a router notices a restart without traffic.
//
// Ownership: owns its HTTP server, publisher and sweeper. Thread safety: handlers run on the
// HTTP lanes; the core is guarded by one mutex; Shutdown from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "store/store_core.h"

namespace kvroute::kv {
class ZmqEventPublisher;
}
namespace kvroute::net {
class HttpServer;
}

namespace kvroute::store {

struct StoreServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8200;  // 0: the OS picks one
  StoreOptions store;
  std::string kv_events_endpoint = "tcp://*:5600";  // bound (vLLM's rule: '*' binds)
  std::string kv_events_replay_endpoint;           // empty: no replay socket
  std::chrono::milliseconds sweep_interval{1000};
};

class StoreServer {
 public:
  static std::expected<std::unique_ptr<StoreServer>, std::string> Start(StoreServerOptions options);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  std::uint16_t port() const;
  std::string events_endpoint() const;
  std::string replay_endpoint() const;
  StoreCounters counters() const;
  std::size_t size() const;
  void Shutdown();

 private:
  StoreServer(StoreServerOptions options);
  Nanos Now() const;
  // Publishes the events as one batch; nothing when empty unless `heartbeat`.
  void Publish(std::vector<kv::KvEvent> events, bool heartbeat = false);
  std::string Metrics() const;

  StoreServerOptions options_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  StoreCore core_;  // guarded by mu_
  std::unique_ptr<kv::ZmqEventPublisher> publisher_;
  std::atomic<bool> published_since_sweep_{false};
  std::unique_ptr<net::HttpServer> http_;
  std::condition_variable sweep_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread sweeper_;
};

}  // namespace kvroute::store
