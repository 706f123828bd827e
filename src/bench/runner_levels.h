// Internals of the load generator (runner.cc, runner_workloads.cc); not part of bench's API.
// Runner drives one io_context on the calling thread: each level is one coroutine, so
// LevelState is touched only on that thread and needs no locks.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/metrics_scrape.h"
#include "bench/runner.h"
#include "client/async_http_client.h"

namespace kvroute::bench::runner_internal {

namespace asio = boost::asio;


inline std::string NowIso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Runs one coroutine to completion on `ioc` (the calling thread); rethrows its exception.
template <typename T>
T RunSync(asio::io_context& ioc, asio::awaitable<T> aw) {
  std::optional<T> out;
  asio::co_spawn(
      ioc, [&]() -> asio::awaitable<void> { out = co_await std::move(aw); },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  ioc.restart();
  ioc.run();
  return std::move(*out);
}

// State of one level, touched only on the io_context thread.
struct LevelState {
  workload::LevelResult result;
  std::chrono::steady_clock::time_point started;
  double stop_after_s = kHardMaxLevelSeconds;
  int max_requests = kHardMaxRequests;
  int launched = 0;
  int in_flight = 0;
  int done = 0;
  int errors = 0;
  bool finished = false;  // no more launches and nothing in flight
  bool stopped = false;   // early stop: a client ran out of sessions, nothing more is sent
  std::optional<double> first_send_s, last_end_s;

  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  // Reserves one request slot; false when the level must stop launching.
  bool TryLaunch() {
    if (stopped || launched >= max_requests || Elapsed() >= stop_after_s) return false;
    ++launched;
    ++in_flight;
    return true;
  }
  void Record(workload::RequestRecord rec) {
    --in_flight;
    ++done;
    if (!rec.result.ok) ++errors;
    if (rec.warmup) {  // in the files, not in the level's window
      result.requests.push_back(std::move(rec));
      return;
    }
    const double start = rec.result.start_s;
    const double end = start + rec.result.e2e_s;
    first_send_s = std::min(first_send_s.value_or(start), start);
    last_end_s = std::max(last_end_s.value_or(end), end);
    result.requests.push_back(std::move(rec));
  }
};

class Runner {
 public:
  Runner(const RunnerOptions& options, client::Url target)
      : options_(options),
        target_(std::move(target)),
        http_(ioc_.get_executor(), ClientOptionsFor(options)),
        epoch_(std::chrono::steady_clock::now()) {
    base_path_ = target_.target;
    while (!base_path_.empty() && base_path_.back() == '/') base_path_.pop_back();
  }

  std::expected<void, std::string> Run(workload::RunReport& report);

 private:
  static client::ClientOptions ClientOptionsFor(const RunnerOptions& o) {
    client::ClientOptions c;
    c.timeouts.total = std::chrono::milliseconds(static_cast<long>(o.request_timeout_s * 1000));
    c.timeouts.first_byte = c.timeouts.total;
    c.max_idle_per_origin = 4096;
    return c;
  }
  double Now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
  }
  client::ClientRequest Post(std::string path, std::string body) const {
    client::ClientRequest r;
    r.method = "POST";
    r.host = target_.host;
    r.port = target_.port;
    r.target = base_path_ + path;
    r.body = std::move(body);
    r.content_type = "application/json";
    return r;
  }

  asio::awaitable<std::string> DiscoverModel();
  asio::awaitable<CacheCounters> ScrapeAll();
  // Sends one streamed request and accounts its SSE events. Returns the result and the reply.
  asio::awaitable<std::pair<workload::RequestResult, std::string>> SendStreamed(std::string path,
                                                                      std::string body);
  asio::awaitable<void> Progress(LevelState& level);
  asio::awaitable<void> WaitFinished(LevelState& level);

  asio::awaitable<void> AgenticLevel(LevelState& level, int concurrency, int level_index);
  // One client of a closed loop: takes sessions from `next_session` until none is left.
  // `warmup` given: sends only each session's first turn and keeps its reply there (nullopt:
  // it failed); `answers` given: starts each session at its second turn, after that reply.
  using WarmupAnswers = std::vector<std::optional<std::string>>;
  asio::awaitable<void> AgenticWorker(LevelState& level,
                                      const std::vector<workload::AgenticSession>& sessions,
                                      std::uint64_t seed, int& next_session,
                                      WarmupAnswers* warmup, const WarmupAnswers* answers);
  // Open loop: job i is sent at arrivals[i] seconds after the level starts.
  asio::awaitable<void> OpenLoopLevel(LevelState& level, std::vector<double> arrivals,
                                      std::function<std::pair<std::string, std::string>(int)> job,
                                      std::function<int(int)> group_of);
  std::expected<void, std::string> RunLevel(
      workload::RunReport& report, workload::LevelResult shape,
      const std::function<asio::awaitable<void>(LevelState&)>& body);

  const RunnerOptions& options_;
  client::Url target_;
  std::string base_path_;
  asio::io_context ioc_;
  client::AsyncHttpClient http_;
  std::chrono::steady_clock::time_point epoch_;
  std::string model_;
};

}  // namespace kvroute::bench::runner_internal
