// KvFeed against a real kv::ZmqEventPublisher on tcp://127.0.0.1 (OS-chosen ports) feeding a
// real kv::KvIndex: batches applied, lag measured, an engine restart and a stale episode.
#include "gateway/kv_feed.h"

#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <thread>
#include <zmq.hpp>

#include "kv/event_encode.h"
#include "kv/zmq_publisher.h"

namespace kvroute::gateway {
namespace {

using std::chrono::milliseconds;
constexpr WorkerId kW = 5;
constexpr std::uint32_t kBlock = 16;

std::vector<TokenId> Tokens(TokenId first) {
  std::vector<TokenId> t(kBlock);
  for (std::uint32_t i = 0; i < kBlock; ++i) t[i] = first + i;
  return t;
}

kv::KvEventBatch StoreBatch(kv::EngineHash hash, TokenId first, double ts = 0) {
  kv::KvEventBatch b;
  b.ts = ts;
  b.events.push_back(kv::BlockStored{
      .block_hashes = {hash}, .token_ids = Tokens(first), .block_size = kBlock, .medium = "GPU"});
  return b;
}

kv::KvEventBatch EmptyBatch() { return kv::KvEventBatch{}; }

std::string PortOf(const std::string& endpoint) { return endpoint.substr(endpoint.rfind(':') + 1); }

// Polls `pred` every 10 ms for at most 5 s.
bool WaitFor(const std::function<bool()>& pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return pred();
}

class KvFeedTest : public ::testing::Test {
 protected:
  std::unique_ptr<kv::ZmqEventPublisher> Publisher(kv::ZmqPublisherOptions po) {
    auto p = kv::ZmqEventPublisher::Create(std::move(po));
    EXPECT_TRUE(p.has_value()) << p.error();
    return p ? std::move(*p) : nullptr;
  }
  // The worker as an engine configured with "tcp://*:PORT" (it binds; we connect).
  void Connect(const kv::ZmqEventPublisher& pub) {
    auto r = feed_.AddWorker(kW, {.endpoint = "tcp://*:" + PortOf(pub.endpoint())}, "127.0.0.1");
    ASSERT_TRUE(r.has_value()) << r.error();
    std::this_thread::sleep_for(milliseconds(300));  // subscription reaches the PUB socket
  }
  // Depth of the one-block prompt starting at `first` on kW, and its stale flag.
  std::pair<std::uint32_t, bool> Held(TokenId first) const {
    auto tokens = Tokens(first);
    for (const kv::WorkerMatch& m : index_.Lookup(keyer_.Keys(tokens))) {
      if (m.worker == kW) return {m.any_depth, m.stale};
    }
    return {0, false};
  }

  kv::BlockKeyer keyer_{kBlock};
  kv::KvIndex index_{keyer_};
  KvFeed feed_{&index_,
               {.poll_interval = milliseconds(10),
                .replay_timeout = milliseconds(200),
                .wall_clock_s = [] { return 1000.0; }}};
};

TEST_F(KvFeedTest, AppliesBatchesToTheIndexAndMeasuresLag) {
  auto pub = Publisher({.endpoint = "tcp://127.0.0.1:*"});
  ASSERT_NE(pub, nullptr);
  Connect(*pub);
  ASSERT_TRUE(pub->Publish(StoreBatch(1, 100, /*ts=*/997.5)));
  ASSERT_TRUE(WaitFor([&] { return Held(100).first == 1; }));
  KvFeedCounters c = *feed_.Counters(kW);
  EXPECT_EQ(c.batches, 1u);
  EXPECT_EQ(c.events, 1u);
  EXPECT_DOUBLE_EQ(c.last_lag_s, 2.5);
  EXPECT_DOUBLE_EQ(c.max_lag_s, 2.5);
  EXPECT_FALSE(c.stale);
  EXPECT_EQ(feed_.AllCounters().size(), 1u);
  EXPECT_TRUE(feed_.Endpoint(kW).has_value());
}

TEST_F(KvFeedTest, EngineRestartForgetsWhatTheOldEngineHeld) {
  // A raw PUB socket speaking vLLM's framing, so the "restarted engine" can reuse the
  // endpoint and number its batches from 0 again without rebinding a port.
  zmq::context_t ctx(1);
  zmq::socket_t engine(ctx, zmq::socket_type::pub);
  engine.set(zmq::sockopt::linger, 0);
  engine.bind("tcp://127.0.0.1:*");
  const std::string endpoint = engine.get(zmq::sockopt::last_endpoint);
  auto send = [&](std::uint64_t seq, const kv::KvEventBatch& batch) {
    std::array<std::uint8_t, 8> be{};
    for (int i = 0; i < 8; ++i) be[i] = static_cast<std::uint8_t>(seq >> (56 - 8 * i));
    std::vector<std::uint8_t> payload = kv::EncodeEventBatch(batch, {});
    engine.send(zmq::buffer(std::string()), zmq::send_flags::sndmore);
    engine.send(zmq::buffer(be), zmq::send_flags::sndmore);
    engine.send(zmq::buffer(payload), zmq::send_flags::none);
  };
  auto r = feed_.AddWorker(kW, {.endpoint = "tcp://*:" + PortOf(endpoint)}, "127.0.0.1");
  ASSERT_TRUE(r.has_value()) << r.error();
  std::this_thread::sleep_for(milliseconds(300));  // subscription reaches the PUB socket
  send(0, StoreBatch(1, 100));
  for (std::uint64_t seq = 1; seq < 10; ++seq) send(seq, EmptyBatch());
  ASSERT_TRUE(WaitFor([&] { return feed_.Counters(kW)->batches == 10; }));
  ASSERT_EQ(Held(100).first, 1u);
  send(0, StoreBatch(2, 200));  // the new engine's first batch
  ASSERT_TRUE(WaitFor([&] { return Held(200).first == 1; }));
  EXPECT_EQ(feed_.Counters(kW)->restarts, 1u);
  EXPECT_EQ(Held(100).first, 0u);  // the old engine's cache is gone
  feed_.RemoveWorker(kW);
}

TEST_F(KvFeedTest, LostBatchesMarkTheWorkerStaleUntilAResync) {
  kv::ZmqPublisherOptions po{.endpoint = "tcp://127.0.0.1:*"};
  po.drop_on_wire_for_test = [](std::uint64_t seq) { return seq == 2; };
  auto pub = Publisher(std::move(po));
  ASSERT_NE(pub, nullptr);
  Connect(*pub);
  ASSERT_TRUE(pub->Publish(StoreBatch(1, 100)));
  for (int i = 1; i < 5; ++i) ASSERT_TRUE(pub->Publish(EmptyBatch()));
  ASSERT_TRUE(WaitFor([&] { return feed_.Counters(kW)->stale; }));
  EXPECT_EQ(feed_.Counters(kW)->stale_episodes, 1u);
  EXPECT_EQ(Held(100), std::make_pair(1u, true));  // kept, but flagged
  // The engine clears its cache (e.g. reset_prefix_cache): the view is complete again.
  kv::KvEventBatch clear;
  clear.events.push_back(kv::AllBlocksCleared{});
  ASSERT_TRUE(pub->Publish(clear));
  ASSERT_TRUE(pub->Publish(StoreBatch(3, 300)));
  ASSERT_TRUE(WaitFor([&] { return Held(300).first == 1; }));
  KvFeedCounters c = *feed_.Counters(kW);
  EXPECT_FALSE(c.stale);
  EXPECT_EQ(c.resyncs, 1u);
  EXPECT_EQ(Held(300), std::make_pair(1u, false));
  EXPECT_EQ(Held(100).first, 0u);
}

TEST_F(KvFeedTest, RemoveWorkerStopsTheFeedAndClearsTheIndex) {
  auto pub = Publisher({.endpoint = "tcp://127.0.0.1:*"});
  ASSERT_NE(pub, nullptr);
  Connect(*pub);
  ASSERT_TRUE(pub->Publish(StoreBatch(1, 100)));
  ASSERT_TRUE(WaitFor([&] { return Held(100).first == 1; }));
  feed_.RemoveWorker(kW);
  EXPECT_EQ(Held(100).first, 0u);
  EXPECT_FALSE(feed_.Counters(kW).has_value());
  EXPECT_FALSE(feed_.Endpoint(kW).has_value());
}

TEST_F(KvFeedTest, AWorkerWithoutEndpointIsRefused) {
  EXPECT_FALSE(feed_.AddWorker(kW, {}, "127.0.0.1").has_value());
}

}  // namespace
}  // namespace kvroute::gateway
