// LanePool: N "lanes", each a single-threaded Asio io_context run by its own thread — the
// event-loop-per-thread model of nginx and Envoy.
//
// Why: `kvroute serve` relays every SSE chunk from an upstream socket to a downstream socket.
// When the two sockets live on different threads, every chunk costs two cross-thread wake-ups
// (futex/eventfd, context switches). Sharing one LanePool between net::HttpServer and the
// gateway's Proxy puts a request's client connection and its upstream request on the same
// lane, so a relayed chunk never leaves its thread. A single-threaded lane also needs no
// strand: everything posted to it runs in order on its thread.
//
// Lanes are numbered 0..size()-1; net::HttpRequest::lane names the lane a request's
// connection runs on, so a handler can keep follow-up work on that thread.
//
// Ownership: the pool owns its io_contexts and threads; the threads start in the constructor.
// I/O objects created on a lane (sockets, timers) must be destroyed before the pool.
// Thread safety: size, context, NextLane, InLane: any thread. Stop: any thread but a lane's
// own (it joins them); idempotent. Work posted after Stop is never run.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace kvroute::net {

class LanePool {
 public:
  explicit LanePool(int lanes);  // at least 1
  ~LanePool();                   // Stop()
  LanePool(const LanePool&) = delete;
  LanePool& operator=(const LanePool&) = delete;

  int size() const { return static_cast<int>(lanes_.size()); }
  // REQUIRES: 0 <= lane < size().
  boost::asio::io_context& context(int lane);
  // Round robin over the lanes (connections, or work with no lane of its own).
  int NextLane();
  // Whether the calling thread is `lane`'s thread.
  bool InLane(int lane) const;

  // Lets each lane finish the handler it is running, stops the loops and joins the threads.
  void Stop();

 private:
  struct Lane;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<unsigned> next_{0};
  std::atomic<bool> stopped_{false};
};

}  // namespace kvroute::net
