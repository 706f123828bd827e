// PeriodicPoller: the one background loop behind HealthChecker (GET /health) and
// EngineMetricsScraper (GET /metrics): every interval it asks whom to poll, GETs
// <base_url><path> of each target in turn and hands each outcome to a callback. What an
// outcome means (2xx = healthy, 200 + Prometheus text = metrics) is the caller's business.
//
// A round never overlaps the next: a slow target delays the round, bounded by `timeout` per
// target. Stop() is checked between targets, so it returns within one request timeout.
//
// Ownership: owns its HTTP client and its thread; the callbacks must outlive the poller.
// Thread safety: Start/Stop may be called from any thread; the callbacks run on the poller
// thread (or on the thread calling RunOnce) and never concurrently with each other for one
// round. RunOnce must not run concurrently with the background loop on the same poller.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/client_types.h"
#include "common/types.h"

namespace kvroute::client {
class BlockingHttpClient;
}

namespace kvroute::gateway {

struct PollTarget {
  WorkerId worker = 0;
  std::string base_url;  // http://host:port
};

struct PollerOptions {
  std::chrono::milliseconds interval{1'000};
  std::chrono::milliseconds timeout{2'000};  // per target, whole exchange
  std::string path = "/";
  std::size_t max_body_bytes = 64u << 20;  // larger responses are errors
};

// A response of any status, or why none came: "bad URL: ..." or "<error kind>: <detail>".
using PollOutcome = std::expected<client::ClientResponse, std::string>;

class PeriodicPoller {
 public:
  using TargetsFn = std::function<std::vector<PollTarget>()>;
  using ResultFn = std::function<void(WorkerId, PollOutcome)>;
  PeriodicPoller(PollerOptions options, TargetsFn targets, ResultFn on_result);
  ~PeriodicPoller();  // Stop()
  PeriodicPoller(const PeriodicPoller&) = delete;
  PeriodicPoller& operator=(const PeriodicPoller&) = delete;

  // Starts the background loop (first round at once). No-op when running or stopped.
  void Start();
  void Stop();  // idempotent; a stopped poller does not start again
  // One round on the calling thread (start-up, tests); skips the rest once stopped.
  void RunOnce();
  std::uint64_t rounds() const { return rounds_.load(); }  // completed rounds

 private:
  void Loop();
  bool Stopped();

  const PollerOptions options_;
  const TargetsFn targets_;
  const ResultFn on_result_;
  std::unique_ptr<client::BlockingHttpClient> http_;
  std::atomic<std::uint64_t> rounds_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace kvroute::gateway
