// ParityProbeQueue: held until Start, batches in order, bounded, and nothing after Stop.
#include "gateway/parity_probe_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace kvroute::gateway {
namespace {

// Records each batch the queue hands over; lets a test wait for a number of probed workers.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<WorkerId>> batches;
  int running = 0;
  int max_running = 0;

  ParityProbeQueue::ProbeBatch Probe() {
    return [this](const std::vector<WorkerId>& batch) {
      {
        std::lock_guard lock(mu);
        max_running = std::max(max_running, ++running);
      }
      std::lock_guard lock(mu);
      --running;
      batches.push_back(batch);
      cv.notify_all();
    };
  }
  std::vector<WorkerId> WaitFor(std::size_t workers) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(5), [&] { return Flat().size() >= workers; });
    return Flat();
  }
  std::vector<WorkerId> Flat() {
    std::vector<WorkerId> out;
    for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
    return out;
  }
};

TEST(ParityProbeQueueTest, HoldsJoinsUntilStartThenProbesThemInOrder) {
  Recorder r;
  ParityProbeQueue q(r.Probe());
  ASSERT_TRUE(q.Enqueue(3));
  ASSERT_TRUE(q.Enqueue(5));
  EXPECT_EQ(q.pending(), 2u);
  {
    std::lock_guard lock(r.mu);
    EXPECT_TRUE(r.batches.empty());  // no thread runs before Start
  }
  q.Start();
  EXPECT_EQ(r.WaitFor(2), (std::vector<WorkerId>{3, 5}));
  ASSERT_TRUE(q.Enqueue(8));
  EXPECT_EQ(r.WaitFor(3), (std::vector<WorkerId>{3, 5, 8}));
  q.Stop();
  std::lock_guard lock(r.mu);
  EXPECT_EQ(r.max_running, 1);
}

TEST(ParityProbeQueueTest, RefusesJoinsBeyondItsCapacity) {
  Recorder r;
  ParityProbeQueue q(r.Probe(), /*capacity=*/2);
  EXPECT_TRUE(q.Enqueue(1));
  EXPECT_TRUE(q.Enqueue(2));
  EXPECT_FALSE(q.Enqueue(3));
  EXPECT_EQ(q.pending(), 2u);
}

TEST(ParityProbeQueueTest, StopDropsWhatWaitsAndRefusesLaterJoins) {
  Recorder r;
  ParityProbeQueue q(r.Probe());
  ASSERT_TRUE(q.Enqueue(1));
  q.Stop();
  EXPECT_EQ(q.pending(), 0u);
  EXPECT_FALSE(q.Enqueue(2));
  q.Start();  // after Stop: no thread, nothing probed
  q.Stop();
  std::lock_guard lock(r.mu);
  EXPECT_TRUE(r.batches.empty());
}

}  // namespace
}  // namespace kvroute::gateway
