#include "gateway/parity_probe_queue.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace kvroute::gateway {

ParityProbeQueue::ParityProbeQueue(ProbeBatch probe, std::size_t capacity)
    : probe_(std::move(probe)), capacity_(capacity) {}

ParityProbeQueue::~ParityProbeQueue() { Stop(); }

bool ParityProbeQueue::Enqueue(WorkerId worker) {
  {
    std::lock_guard lock(mu_);
    if (stop_) return false;
    if (waiting_.size() >= capacity_) {
      spdlog::warn("parity: {} joined workers wait for their probe already; worker id {} is "
                   "not probed (ParityChecker still watches its traffic)",
                   waiting_.size(), worker);
      return false;
    }
    waiting_.push_back(worker);
  }
  cv_.notify_one();
  return true;
}

void ParityProbeQueue::Start() {
  std::lock_guard lock(mu_);
  if (stop_ || thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void ParityProbeQueue::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    waiting_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::size_t ParityProbeQueue::pending() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

void ParityProbeQueue::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !waiting_.empty(); });
    if (stop_) return;
    std::vector<WorkerId> batch = std::exchange(waiting_, {});
    lock.unlock();
    probe_(batch);
    lock.lock();
  }
}

}  // namespace kvroute::gateway
