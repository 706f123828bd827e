// LanePool: see lane_pool.h.
#include "net/lane_pool.h"

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace kvroute::net {

namespace asio = boost::asio;

struct LanePool::Lane {
  // Concurrency hint 1: one thread runs this context, so work posted from that thread goes
  // to a thread-private queue (no lock, no wake-up); work posted from elsewhere still works.
  asio::io_context ctx{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard{ctx.get_executor()};
  std::thread thread;
};

LanePool::LanePool(int lanes) {
  const int n = std::max(1, lanes);
  for (int i = 0; i < n; ++i) lanes_.push_back(std::make_unique<Lane>());
  for (auto& lane : lanes_) {
    Lane* l = lane.get();
    l->thread = std::thread([l] { l->ctx.run(); });
  }
}

LanePool::~LanePool() { Stop(); }

asio::io_context& LanePool::context(int lane) {
  return lanes_[static_cast<std::size_t>(lane)]->ctx;
}

int LanePool::NextLane() {
  return static_cast<int>(next_.fetch_add(1, std::memory_order_relaxed) % lanes_.size());
}

bool LanePool::InLane(int lane) const {
  if (lane < 0 || lane >= size()) return false;
  return lanes_[static_cast<std::size_t>(lane)]->ctx.get_executor().running_in_this_thread();
}

void LanePool::Stop() {
  if (stopped_.exchange(true)) return;
  for (auto& lane : lanes_) {
    lane->guard.reset();
    lane->ctx.stop();
  }
  for (auto& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
}

}  // namespace kvroute::net
