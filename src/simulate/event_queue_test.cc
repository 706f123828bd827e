#include "simulate/event_queue.h"

#include <gtest/gtest.h>

namespace kvroute::simulate {
namespace {

TEST(EventQueueTest, PopsInTimeOrder) {
  EventQueue q;
  q.Push(Nanos(30), EventKind::kArrival, 3);
  q.Push(Nanos(10), EventKind::kArrival, 1);
  q.Push(Nanos(20), EventKind::kArrival, 2);
  EXPECT_EQ(q.Pop().a, 1u);
  EXPECT_EQ(q.Pop().a, 2u);
  EXPECT_EQ(q.Pop().a, 3u);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueueTest, EqualTimesPopInPushOrder) {
  EventQueue q;
  for (std::uint32_t i = 0; i < 100; ++i) {
    q.Push(Nanos(5), i % 2 == 0 ? EventKind::kStepEnd : EventKind::kKvDelivery, i);
  }
  for (std::uint32_t i = 0; i < 100; ++i) EXPECT_EQ(q.Pop().a, i);
}

TEST(EventQueueTest, SequenceNumbersCountPushes) {
  EventQueue q;
  EXPECT_EQ(q.Push(Nanos(1), EventKind::kScrape), 0u);
  EXPECT_EQ(q.Push(Nanos(0), EventKind::kScrape), 1u);
  EXPECT_EQ(q.top().seq, 1u);
  EXPECT_EQ(q.size(), 2u);
}

}  // namespace
}  // namespace kvroute::simulate
