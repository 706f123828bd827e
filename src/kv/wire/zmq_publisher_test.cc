// Publisher tests against raw ZeroMQ peers on 127.0.0.1 (OS-chosen ports): frame layout,
// sequence numbers, replay framing, queue bound, bind-or-connect rule.
#include "kv/wire/zmq_publisher.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "kv/wire/event_decode.h"

namespace kvroute::kv {
namespace {

using std::chrono::milliseconds;

std::uint64_t Be64(const zmq::message_t& m) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < m.size(); ++i) v = (v << 8) | m.data<std::uint8_t>()[i];
  return v;
}

KvEventBatch BatchWithTs(double ts) {
  KvEventBatch b;
  b.ts = ts;
  b.events.push_back(
      BlockRemoved{.block_hashes = {static_cast<EngineHash>(ts)}, .medium = "GPU", .group_idx = 0});
  return b;
}

// Receives one multipart message within `timeout`; empty on timeout.
std::vector<zmq::message_t> Receive(zmq::socket_t& s, milliseconds timeout) {
  std::vector<zmq::message_t> frames;
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, timeout) > 0) {
    (void)zmq::recv_multipart(s, std::back_inserter(frames), zmq::recv_flags::dontwait);
  }
  return frames;
}

TEST(EngineBindsEndpointTest, FollowsVllmRule) {
  EXPECT_TRUE(EngineBindsEndpoint("tcp://*:5557"));
  EXPECT_TRUE(EngineBindsEndpoint("tcp://[::]:5557"));
  EXPECT_TRUE(EngineBindsEndpoint("ipc:///tmp/kv"));
  EXPECT_TRUE(EngineBindsEndpoint("inproc://kv"));
  EXPECT_FALSE(EngineBindsEndpoint("tcp://indexer:5557"));
  EXPECT_FALSE(EngineBindsEndpoint("tcp://127.0.0.1:5557"));
}

class PublisherTest : public ::testing::Test {
 protected:
  void StartPublisher(ZmqPublisherOptions o) {
    auto p = ZmqEventPublisher::Create(std::move(o));
    ASSERT_TRUE(p.has_value()) << p.error();
    pub_ = std::move(*p);
  }

  // Connects a SUB socket and waits until a subscription is effective, by publishing nothing
  // and giving the handshake time; the tests below tolerate a late join anyway through seq.
  void ConnectSub(const std::string& topic = "") {
    sub_ = zmq::socket_t(ctx_, zmq::socket_type::sub);
    sub_.set(zmq::sockopt::subscribe, topic);
    sub_.set(zmq::sockopt::linger, 0);
    sub_.connect(pub_->endpoint());
    std::this_thread::sleep_for(milliseconds(300));
  }

  zmq::context_t ctx_{1};
  zmq::socket_t sub_;
  std::unique_ptr<ZmqEventPublisher> pub_;
};

TEST_F(PublisherTest, SendsThreeFramesWithTopicBigEndianSeqFromZeroAndPayload) {
  StartPublisher({.endpoint = "tcp://127.0.0.1:*", .topic = "kv@pod@model"});
  ConnectSub("kv@");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pub_->Publish(BatchWithTs(i)));
  for (std::uint64_t want = 0; want < 3; ++want) {
    auto frames = Receive(sub_, milliseconds(5000));
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].to_string(), "kv@pod@model");
    ASSERT_EQ(frames[1].size(), 8u);
    EXPECT_EQ(Be64(frames[1]), want);
    KvEventBatch decoded;
    ASSERT_TRUE(DecodeEventBatch(frames[2].data<std::uint8_t>(), frames[2].size(), &decoded).ok());
    EXPECT_EQ(decoded.ts, static_cast<double>(want));
    EXPECT_EQ(decoded.data_parallel_rank, 0);  // stamped as vLLM does for rank 0
  }
}

TEST_F(PublisherTest, ReplayReturnsBufferedBatchesFromStartThenEndMarker) {
  StartPublisher(
      {.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*", .buffer_steps = 3});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pub_->Publish(BatchWithTs(i)));
  // Wait (bounded) until the thread has numbered all five.
  for (int i = 0; i < 500 && pub_->stats().published < 5; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(pub_->stats().published, 5u);

  zmq::socket_t dealer(ctx_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(pub_->replay_endpoint());
  const std::uint8_t start[8] = {0, 0, 0, 0, 0, 0, 0, 1};
  dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start, 8), zmq::send_flags::none);

  // Buffer holds seq 2, 3, 4 (buffer_steps = 3); start 1 returns those, then the marker.
  for (std::uint64_t want : {2u, 3u, 4u}) {
    auto frames = Receive(dealer, milliseconds(5000));
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].size(), 0u);
    EXPECT_EQ(Be64(frames[1]), want);
    KvEventBatch decoded;
    ASSERT_TRUE(DecodeEventBatch(frames[2].data<std::uint8_t>(), frames[2].size(), &decoded).ok());
    EXPECT_EQ(decoded.ts, static_cast<double>(want));
  }
  auto end = Receive(dealer, milliseconds(5000));
  ASSERT_EQ(end.size(), 3u);
  EXPECT_EQ(Be64(end[1]), kReplayEndSeq);
  EXPECT_EQ(end[2].size(), 0u);
  EXPECT_EQ(pub_->stats().replay_requests, 1u);
}

TEST_F(PublisherTest, ReplayIgnoresRequestsThatAreNotOneEightByteSeq) {
  StartPublisher({.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*"});
  zmq::socket_t dealer(ctx_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(pub_->replay_endpoint());
  dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  dealer.send(zmq::str_buffer("abc"), zmq::send_flags::none);
  EXPECT_TRUE(Receive(dealer, milliseconds(300)).empty());
  EXPECT_EQ(pub_->stats().replay_requests, 0u);
}

TEST_F(PublisherTest, FullQueueDropsAndCountsInsteadOfBlocking) {
  // The test hook runs on the publisher thread: holding it there keeps the queue full.
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ZmqPublisherOptions o{.endpoint = "tcp://127.0.0.1:*", .max_queue_size = 1};
  o.drop_on_wire_for_test = [&entered, released](std::uint64_t seq) {
    if (seq == 0) {
      entered.set_value();
      released.wait_for(std::chrono::seconds(10));
    }
    return false;
  };
  StartPublisher(std::move(o));
  ASSERT_TRUE(pub_->Publish(BatchWithTs(0)));
  ASSERT_EQ(entered.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(pub_->Publish(BatchWithTs(1)));   // fills the one slot
  EXPECT_FALSE(pub_->Publish(BatchWithTs(2)));  // dropped, returns at once
  EXPECT_FALSE(pub_->Publish(BatchWithTs(3)));
  release.set_value();
  pub_->Shutdown();
  const auto s = pub_->stats();
  EXPECT_EQ(s.dropped_queue_full, 2u);
  EXPECT_EQ(s.published, 2u);
}

TEST_F(PublisherTest, PublishAfterShutdownIsRefused) {
  StartPublisher({.endpoint = "tcp://127.0.0.1:*"});
  pub_->Shutdown();
  EXPECT_FALSE(pub_->Publish(BatchWithTs(1)));
  pub_->Shutdown();  // idempotent
}

TEST_F(PublisherTest, BadEndpointIsAnError) {
  auto p = ZmqEventPublisher::Create({.endpoint = "nonsense://*"});
  EXPECT_FALSE(p.has_value());
}

}  // namespace
}  // namespace kvroute::kv
