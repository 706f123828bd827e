#include "gateway/periodic_poller.h"

#include <utility>

#include "client/blocking_http_client.h"

namespace kvroute::gateway {

PeriodicPoller::PeriodicPoller(PollerOptions options, TargetsFn targets, ResultFn on_result)
    : options_(std::move(options)),
      targets_(std::move(targets)),
      on_result_(std::move(on_result)),
      // Every wait is the per-target timeout, so one dead worker costs a round at most that.
      // Two idle connections per origin: the poller only ever has one request in flight.
      http_(std::make_unique<client::BlockingHttpClient>(
          client::ClientOptions{.timeouts = {.connect = options_.timeout,
                                             .first_byte = options_.timeout,
                                             .idle = options_.timeout,
                                             .total = options_.timeout},
                                .max_idle_per_origin = 2,
                                .max_body_bytes = options_.max_body_bytes})) {}

PeriodicPoller::~PeriodicPoller() { Stop(); }

void PeriodicPoller::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Loop(); });
}

void PeriodicPoller::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool PeriodicPoller::Stopped() {
  std::lock_guard lock(mu_);
  return stop_;
}

void PeriodicPoller::RunOnce() {
  for (const PollTarget& t : targets_()) {
    if (Stopped()) return;
    auto req = client::MakeRequest("GET", t.base_url + options_.path);
    if (!req) {
      on_result_(t.worker, std::unexpected("bad URL: " + req.error()));
      continue;
    }
    auto resp = http_->Send(std::move(*req));
    if (!resp) {
      on_result_(t.worker, std::unexpected(std::string(client::ErrorKindName(resp.error().kind)) +
                                           ": " + resp.error().text));
      continue;
    }
    on_result_(t.worker, std::move(*resp));
  }
  rounds_.fetch_add(1);
}

void PeriodicPoller::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    RunOnce();
    lock.lock();
    cv_.wait_for(lock, options_.interval, [this] { return stop_; });
  }
}

}  // namespace kvroute::gateway
