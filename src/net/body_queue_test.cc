#include "net/body_queue.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace kvroute::net {
namespace {

struct Pulled {
  bool called = false;
  std::optional<std::string> piece;
};

BodySource::Deliver Capture(Pulled* out) {
  return [out](std::optional<std::string> p) {
    out->called = true;
    out->piece = std::move(p);
  };
}

TEST(ChunkQueueTest, PiecesQueuedBeforePullAreCoalescedIntoOne) {
  ChunkQueue q;
  ASSERT_TRUE(q.Push("a"));
  ASSERT_TRUE(q.Push("bc"));
  Pulled p;
  q.Pull(Capture(&p));
  ASSERT_TRUE(p.called);
  EXPECT_EQ(p.piece, "abc");
}

TEST(ChunkQueueTest, PendingPullIsCompletedByTheNextPush) {
  ChunkQueue q;
  Pulled p;
  q.Pull(Capture(&p));
  EXPECT_FALSE(p.called);
  q.Push("x");
  ASSERT_TRUE(p.called);
  EXPECT_EQ(p.piece, "x");
}

TEST(ChunkQueueTest, CloseEndsTheBodyAfterBufferedPieces) {
  ChunkQueue q;
  q.Push("last");
  q.Close();
  Pulled first, second;
  q.Pull(Capture(&first));
  q.Pull(Capture(&second));
  EXPECT_EQ(first.piece, "last");
  ASSERT_TRUE(second.called);
  EXPECT_FALSE(second.piece.has_value());
  EXPECT_FALSE(q.Push("late"));
}

TEST(ChunkQueueTest, CancelCompletesPendingPullAndRunsOnCancelOnce) {
  int cancels = 0;
  ChunkQueue q([&cancels] { ++cancels; });
  Pulled p;
  q.Pull(Capture(&p));
  q.Cancel();
  q.Cancel();
  ASSERT_TRUE(p.called);
  EXPECT_FALSE(p.piece.has_value());
  EXPECT_EQ(cancels, 1);
  EXPECT_TRUE(q.cancelled());
  EXPECT_FALSE(q.Push("x"));
}

TEST(ChunkQueueTest, CancelAfterCloseDoesNotRunOnCancel) {
  int cancels = 0;
  ChunkQueue q([&cancels] { ++cancels; });
  q.Close();
  q.Cancel();
  EXPECT_EQ(cancels, 0);
}

TEST(ChunkQueueTest, ExceedingTheBufferBoundCancelsTheStream) {
  int cancels = 0;
  ChunkQueue q([&cancels] { ++cancels; }, /*max_buffered_bytes=*/4);
  EXPECT_TRUE(q.Push("abc"));
  EXPECT_FALSE(q.Push("de"));
  EXPECT_EQ(cancels, 1);
  Pulled p;
  q.Pull(Capture(&p));
  EXPECT_FALSE(p.piece.has_value());
}

TEST(DeferredSlotTest, SetBeforeWaitIsDeliveredOnWait) {
  DeferredSlot slot;
  slot.Set(JsonResponse(201, "{}"));
  std::optional<HttpResponse> got;
  slot.Wait([&got](HttpResponse r) { got = std::move(r); });
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 201);
}

TEST(DeferredSlotTest, SetAfterWaitCompletesTheWaiterOnlyOnce) {
  DeferredSlot slot;
  int calls = 0;
  slot.Wait([&calls](HttpResponse r) {
    ++calls;
    EXPECT_EQ(r.status, 200);
  });
  slot.Set(JsonResponse(200, "{}"));
  slot.Set(JsonResponse(500, "{}"));
  slot.Cancel();
  EXPECT_EQ(calls, 1);
}

TEST(DeferredSlotTest, CancelCompletesWaiterWith503AndRunsOnCancel) {
  bool cancelled = false;
  DeferredSlot slot([&cancelled] { cancelled = true; });
  std::optional<HttpResponse> got;
  slot.Wait([&got](HttpResponse r) { got = std::move(r); });
  slot.Cancel();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 503);
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(slot.cancelled());
}

}  // namespace
}  // namespace kvroute::net
