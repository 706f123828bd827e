// LanePool: each lane is one thread, work posted to a lane runs there in order, and Stop
// joins the threads.
#include "net/lane_pool.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <set>
#include <thread>
#include <vector>

namespace kvroute::net {
namespace {

// Runs fn on `lane` and waits (bounded) for its result.
template <typename Fn>
auto OnLane(LanePool& pool, int lane, Fn fn) {
  std::promise<decltype(fn())> done;
  auto result = done.get_future();
  boost::asio::post(pool.context(lane), [&done, fn] { done.set_value(fn()); });
  EXPECT_EQ(result.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  return result.get();
}

TEST(LanePool, EachLaneIsOneThreadOfItsOwn) {
  LanePool pool(3);
  ASSERT_EQ(pool.size(), 3);
  std::set<std::thread::id> ids;
  for (int lane = 0; lane < 3; ++lane) {
    for (int i = 0; i < 4; ++i)
      ids.insert(OnLane(pool, lane, [] { return std::this_thread::get_id(); }));
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
}

TEST(LanePool, InLaneIsTrueOnlyOnThatLanesThread) {
  LanePool pool(2);
  EXPECT_TRUE(OnLane(pool, 1, [&pool] { return pool.InLane(1); }));
  EXPECT_FALSE(OnLane(pool, 1, [&pool] { return pool.InLane(0); }));
  EXPECT_FALSE(pool.InLane(0));
  EXPECT_FALSE(pool.InLane(-1));
  EXPECT_FALSE(pool.InLane(2));
}

TEST(LanePool, WorkPostedToALaneRunsInOrder) {
  LanePool pool(2);
  std::vector<int> seen;  // touched only on lane 0
  for (int i = 0; i < 100; ++i)
    boost::asio::post(pool.context(0), [&seen, i] { seen.push_back(i); });
  auto copy = OnLane(pool, 0, [&seen] { return seen; });
  ASSERT_EQ(copy.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(copy[static_cast<std::size_t>(i)], i);
}

TEST(LanePool, NextLaneCyclesOverEveryLane) {
  LanePool pool(3);
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 9; ++i) ++counts[static_cast<std::size_t>(pool.NextLane())];
  EXPECT_EQ(counts, (std::vector<int>{3, 3, 3}));
}

TEST(LanePool, StopJoinsTheThreadsAndIsIdempotent) {
  LanePool pool(2);
  OnLane(pool, 0, [] { return 0; });
  pool.Stop();
  pool.Stop();
  EXPECT_TRUE(pool.context(0).stopped());
  EXPECT_TRUE(pool.context(1).stopped());
}

TEST(LanePool, ZeroLanesMeansOne) {
  LanePool pool(0);
  EXPECT_EQ(pool.size(), 1);
  EXPECT_EQ(pool.NextLane(), 0);
}

}  // namespace
}  // namespace kvroute::net
