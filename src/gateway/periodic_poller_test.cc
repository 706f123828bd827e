#include "gateway/periodic_poller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/http_server.h"

namespace kvroute::gateway {
namespace {

using std::chrono::milliseconds;

// A fake worker on 127.0.0.1: GET /probe answers `status` with body "ok".
class FakeTarget {
 public:
  FakeTarget() {
    server_.Handle("GET", "/probe", [this](const net::HttpRequest&) -> net::HandlerResult {
      return net::TextResponse(status.load(), "ok");
    });
    started_ = server_.Start().has_value();
  }
  ~FakeTarget() { server_.Shutdown(milliseconds(0)); }
  bool started() const { return started_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }

  std::atomic<int> status{200};

 private:
  net::HttpServer server_{{.threads = 1}};
  bool started_ = false;
};

// Collects outcomes by worker, in arrival order.
struct Outcomes {
  std::mutex mu;
  std::vector<WorkerId> order;
  std::map<WorkerId, PollOutcome> by_worker;
  PeriodicPoller::ResultFn Sink() {
    return [this](WorkerId w, PollOutcome o) {
      std::lock_guard lock(mu);
      order.push_back(w);
      by_worker.insert_or_assign(w, std::move(o));
    };
  }
};

PollerOptions Opts() { return {.timeout = milliseconds(2'000), .path = "/probe"}; }

TEST(PeriodicPollerTest, ReportsEachTargetInTurnWithItsResponseOrError) {
  FakeTarget fake;
  ASSERT_TRUE(fake.started());
  Outcomes got;
  PeriodicPoller poller(
      Opts(),
      [&] {
        return std::vector<PollTarget>{{1, fake.url()}, {2, "http://127.0.0.1:1"}, {3, "nope"}};
      },
      got.Sink());
  poller.RunOnce();
  EXPECT_EQ(poller.rounds(), 1u);
  ASSERT_EQ(got.order, (std::vector<WorkerId>{1, 2, 3}));
  ASSERT_TRUE(got.by_worker.at(1).has_value()) << got.by_worker.at(1).error();
  EXPECT_EQ(got.by_worker.at(1)->status, 200);
  EXPECT_EQ(got.by_worker.at(1)->body, "ok");
  ASSERT_FALSE(got.by_worker.at(2).has_value());
  EXPECT_EQ(got.by_worker.at(2).error().rfind("connect_refused: ", 0), 0u)
      << got.by_worker.at(2).error();
  ASSERT_FALSE(got.by_worker.at(3).has_value());
  EXPECT_EQ(got.by_worker.at(3).error().rfind("bad URL: ", 0), 0u) << got.by_worker.at(3).error();
}

// One round against one target at `url`; what the poller reported for it.
PollOutcome PollOnce(const std::string& url, const std::string& path) {
  Outcomes got;
  PollerOptions options = Opts();
  options.path = path;
  PeriodicPoller poller(
      options,
      [&] {
        return std::vector<PollTarget>{{1, url}};
      },
      got.Sink());
  poller.RunOnce();
  if (got.by_worker.size() != 1) return std::unexpected("no outcome reported");
  return got.by_worker.at(1);
}

TEST(PeriodicPollerTest, AnErrorStatusIsAResponseNotAnError) {
  FakeTarget fake;
  ASSERT_TRUE(fake.started());
  fake.status = 503;
  PollOutcome got = PollOnce(fake.url(), "/probe");
  ASSERT_TRUE(got.has_value()) << got.error();
  EXPECT_EQ(got->status, 503);
}

TEST(PeriodicPollerTest, RequestsThePathAppendedToTheBaseUrl) {
  FakeTarget fake;
  ASSERT_TRUE(fake.started());
  PollOutcome got = PollOnce(fake.url(), "/elsewhere");  // the fake answers only /probe
  ASSERT_TRUE(got.has_value()) << got.error();
  EXPECT_EQ(got->status, 404);
}

TEST(PeriodicPollerTest, StopDuringARoundSkipsTheRemainingTargets) {
  std::vector<WorkerId> seen;
  PeriodicPoller* self = nullptr;
  PeriodicPoller poller(
      Opts(),
      [] {
        return std::vector<PollTarget>{{1, "nope"}, {2, "nope"}};
      },
      [&](WorkerId w, PollOutcome) {
        seen.push_back(w);
        self->Stop();
      });
  self = &poller;
  poller.RunOnce();
  EXPECT_EQ(seen, std::vector<WorkerId>{1});
  EXPECT_EQ(poller.rounds(), 0u);  // the round did not complete
}

TEST(PeriodicPollerTest, BackgroundLoopAsksForTargetsEachRoundAndStopJoinsIt) {
  std::atomic<std::uint64_t> asked{0};
  PollerOptions fast = Opts();
  fast.interval = milliseconds(1);
  PeriodicPoller poller(
      fast,
      [&] {
        asked.fetch_add(1);
        return std::vector<PollTarget>{};
      },
      [](WorkerId, PollOutcome) {});
  poller.Start();
  for (int i = 0; i < 2'000 && poller.rounds() < 3; ++i)
    std::this_thread::sleep_for(milliseconds(5));
  poller.Stop();
  EXPECT_GE(poller.rounds(), 3u);
  // Stop joined the thread: every round that asked for targets has completed, and none follow.
  EXPECT_EQ(poller.rounds(), asked.load());
}

TEST(PeriodicPollerTest, AStoppedPollerNeverStarts) {
  std::atomic<int> asked{0};
  PeriodicPoller poller(
      Opts(),
      [&] {
        asked.fetch_add(1);
        return std::vector<PollTarget>{};
      },
      [](WorkerId, PollOutcome) {});
  poller.Stop();
  poller.Start();
  poller.Stop();
  EXPECT_EQ(asked.load(), 0);
  EXPECT_EQ(poller.rounds(), 0u);
}

}  // namespace
}  // namespace kvroute::gateway
