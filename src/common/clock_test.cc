#include "common/clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace kvroute {
namespace {

TEST(ManualClockTest, MovesOnlyWhenTold) {
  ManualClock clock;
  EXPECT_EQ(clock.Now(), Nanos(0));
  clock.Advance(Nanos(5));
  EXPECT_EQ(clock.Now(), Nanos(5));
  clock.Set(Nanos(100));
  EXPECT_EQ(clock.Now(), Nanos(100));
}

TEST(SteadyClockTest, SpeedupScalesElapsedTime) {
  SteadyClock fast(1000.0);
  auto before = fast.Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  // 2 ms real at 1000x is at least 2 s simulated.
  EXPECT_GE(fast.Now() - before, std::chrono::seconds(2));
  EXPECT_EQ(fast.ToReal(std::chrono::seconds(1)), std::chrono::milliseconds(1));
}

TEST(ConversionsTest, SecondsRoundTrip) {
  EXPECT_DOUBLE_EQ(ToSeconds(FromSeconds(1.25)), 1.25);
}

}  // namespace
}  // namespace kvroute
