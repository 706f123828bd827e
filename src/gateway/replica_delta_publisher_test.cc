// DeltaPublisher (replica_delta_publisher.h) as the RouterState's listener: what a sibling's
// stream carries after real booking calls, the replay a new subscriber gets, and what is
// never published (remote bookings, unknown ids).
#include "gateway/replica_delta_publisher.h"

#include <gtest/gtest.h>

#include <future>

#include "gateway/replica_remote_bookings.h"

namespace kvroute::gateway {
namespace {

using std::chrono::seconds;

class DeltaPublisherTest : public ::testing::Test {
 protected:
  DeltaPublisherTest() {
    fleet::WorkerSpec s;
    s.name = "w0";
    s.base_url = "http://127.0.0.1:1";
    s.models = {"m"};
    EXPECT_TRUE(state_.Add(s, seconds(0)).has_value());
    state_.SetBookingListener(&pub_);
    pub_.Start();
  }
  ~DeltaPublisherTest() override {
    state_.SetBookingListener(nullptr);
    pub_.Stop();
  }
  static fleet::RoutedRequest Routed() {
    return {.worker = 0, .prompt_tokens = 100, .uncached_tokens = 60, .kv_blocks = 8};
  }
  // Reads the stream until `n` deltas arrived (or 2 s passed); nullopt once it has ended.
  std::vector<Delta> ReadDeltas(net::ChunkQueue& q, std::size_t n, bool* ended = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(2);
    while (got_.size() < n && std::chrono::steady_clock::now() < deadline) {
      std::promise<std::optional<std::string>> p;
      auto f = p.get_future();
      q.Pull([&p](std::optional<std::string> piece) { p.set_value(std::move(piece)); });
      auto piece = f.get();
      if (!piece) {
        if (ended) *ended = true;
        break;
      }
      EXPECT_TRUE(decoder_.Feed(*piece, &got_).has_value());
    }
    return got_;
  }

  fleet::RouterState state_;
  DeltaPublisher pub_{DeltaPublisherOptions{.heartbeat = std::chrono::milliseconds(20)}, &state_,
                      0x77};
  FrameDecoder decoder_;
  std::vector<Delta> got_;
};

TEST_F(DeltaPublisherTest, LocalBookingCallsReachTheSubscriberInOrder) {
  auto q = pub_.Subscribe();
  state_.Book(5, Routed(), seconds(1));
  state_.OnFirstToken(5, seconds(2));
  state_.OnFirstToken(5, seconds(2));  // a repeated first token is not repeated
  state_.OnDone(5, seconds(3), true);
  auto d = ReadDeltas(*q, 4);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0], Delta(HelloDelta{.instance = 0x77}));
  EXPECT_EQ(d[1], Delta(BookedDelta{.id = 5, .worker = "w0", .prompt_tokens = 100,
                                    .uncached_tokens = 60, .kv_blocks = 8}));
  EXPECT_EQ(d[2], Delta(FirstTokenDelta{5}));
  EXPECT_EQ(d[3], Delta(ReleasedDelta{5}));
  EXPECT_EQ(pub_.live(), 0u);
}

TEST_F(DeltaPublisherTest, ANewSubscriberGetsTheRequestsInFlightFirst) {
  state_.Book(1, Routed(), seconds(1));
  state_.Book(2, Routed(), seconds(1));
  state_.OnFirstToken(2, seconds(2));
  state_.Book(3, Routed(), seconds(1));
  state_.Cancel(3, seconds(2));
  auto q = pub_.Subscribe();
  auto d = ReadDeltas(*q, 3);
  ASSERT_EQ(d.size(), 3u);
  std::map<RequestId, bool> replayed;
  for (std::size_t i = 1; i < d.size(); ++i) {
    const auto& b = std::get<BookedDelta>(d[i]);
    replayed[b.id] = b.first_token_seen;
  }
  EXPECT_EQ(replayed, (std::map<RequestId, bool>{{1, false}, {2, true}}));
}

TEST_F(DeltaPublisherTest, RemoteAndUnknownBookingsAreNeverPublished) {
  auto q = pub_.Subscribe();
  state_.Book(kRemoteBookingBit | 9, Routed(), seconds(1));  // a sibling's, applied here
  state_.Cancel(kRemoteBookingBit | 9, seconds(2));
  state_.OnDone(1234, seconds(2), true);                     // never booked
  state_.Book(6, Routed(), seconds(3));
  auto d = ReadDeltas(*q, 2);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(std::get<BookedDelta>(d[1]).id, 6u);
}

TEST_F(DeltaPublisherTest, PredictedPrefixesGoOutWithTheWorkersName) {
  auto q = pub_.Subscribe();
  const std::vector<kv::BlockKey> keys{3, 4, 5};
  pub_.OnPredicted(0, keys);
  auto d = ReadDeltas(*q, 2);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1], Delta(PredictedDelta{.worker = "w0", .keys = keys}));
}

TEST_F(DeltaPublisherTest, StopEndsEveryStream) {
  auto q = pub_.Subscribe();
  ReadDeltas(*q, 1);
  pub_.Stop();
  bool ended = false;
  ReadDeltas(*q, 100, &ended);
  EXPECT_TRUE(ended);
  EXPECT_TRUE(pub_.Subscribe()->cancelled() || pub_.subscribers() == 0);
}

}  // namespace
}  // namespace kvroute::gateway
