// KvFeed feeding a real kv::KvIndex from engines on tcp://127.0.0.1 (OS-chosen ports): a real
// kv::ZmqEventPublisher (with its replay socket, so a batch published before the subscription
// is live is repaired, not lost), and a raw XPUB "engine" speaking vLLM's framing, which knows
// when our subscription has arrived and can restart its sequence or lose a batch on purpose.
#include "gateway/kv_feed.h"

#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <thread>
#include <zmq.hpp>

#include "kv/index/index_snapshot.h"
#include "kv/wire/event_encode.h"
#include "kv/wire/zmq_publisher.h"

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

kv::KvEventBatch ClearBatch() {
  kv::KvEventBatch b;
  b.events.push_back(kv::AllBlocksCleared{});
  return b;
}

std::string PortOf(const std::string& endpoint) { return endpoint.substr(endpoint.rfind(':') + 1); }

// Polls `pred` every 10 ms for at most 10 s.
bool WaitFor(const std::function<bool()>& pred) {
  for (int i = 0; i < 1000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return pred();
}

// An engine's PUB side on an XPUB socket: WaitForSubscriber() returns once our SUB's
// subscription has arrived, so nothing sent after it is lost to the slow-joiner race.
class RawEngine {
 public:
  RawEngine() : socket_(ctx_, zmq::socket_type::xpub) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, 10'000);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }
  bool WaitForSubscriber() {
    zmq::message_t msg;
    auto got = socket_.recv(msg, zmq::recv_flags::none);
    return got.has_value() && msg.size() >= 1 && msg.data<std::uint8_t>()[0] == 1;
  }
  void Send(std::uint64_t seq, const kv::KvEventBatch& batch) {
    std::array<std::uint8_t, 8> be{};
    for (int i = 0; i < 8; ++i) be[i] = static_cast<std::uint8_t>(seq >> (56 - 8 * i));
    std::vector<std::uint8_t> payload = kv::EncodeEventBatch(batch, {});
    socket_.send(zmq::buffer(std::string()), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(be), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(payload), zmq::send_flags::none);
  }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t socket_;
  std::string endpoint_;
};

class KvFeedTest : public ::testing::Test {
 protected:
  // The worker as an engine configured with "tcp://*:PORT" (it binds; we connect).
  void Connect(const std::string& engine_endpoint, const std::string& replay_endpoint = {}) {
    KvEventSpec spec{.endpoint = "tcp://*:" + PortOf(engine_endpoint)};
    if (!replay_endpoint.empty()) spec.replay_endpoint = "tcp://*:" + PortOf(replay_endpoint);
    auto r = feed_.AddWorker(kW, spec, "127.0.0.1");
    ASSERT_TRUE(r.has_value()) << r.error();
  }
  std::unique_ptr<kv::ZmqEventPublisher> ConnectedPublisher() {
    auto p = kv::ZmqEventPublisher::Create(
        {.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*"});
    EXPECT_TRUE(p.has_value()) << p.error();
    if (!p) return nullptr;
    Connect((*p)->endpoint(), (*p)->replay_endpoint());
    return std::move(*p);
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
                .replay_timeout = milliseconds(2000),
                .wall_clock_s = [] { return 1000.0; }}};
};

TEST_F(KvFeedTest, AppliesBatchesToTheIndexAndMeasuresLag) {
  auto pub = ConnectedPublisher();
  ASSERT_NE(pub, nullptr);
  ASSERT_TRUE(pub->Publish(StoreBatch(1, 100, /*ts=*/997.5)));
  // Until the subscription is live a batch can be lost on the wire; the next one reveals the
  // gap and the replay socket fills it, so keep publishing until the store has arrived.
  for (int i = 0; i < 100 && Held(100).first == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    if (Held(100).first == 0) {
      ASSERT_TRUE(pub->Publish(EmptyBatch()));
    }
  }
  ASSERT_TRUE(WaitFor([&] { return Held(100).first == 1; }));
  KvFeedCounters c = *feed_.Counters(kW);
  EXPECT_GE(c.batches, 1u);
  EXPECT_EQ(c.max_lag_s, 2.5);  // the only batch with a timestamp
  EXPECT_FALSE(c.stale);
  EXPECT_EQ(feed_.AllCounters().size(), 1u);
  EXPECT_TRUE(feed_.Endpoint(kW).has_value());
}

TEST_F(KvFeedTest, EngineRestartForgetsWhatTheOldEngineHeld) {
  RawEngine engine;
  Connect(engine.endpoint());
  ASSERT_TRUE(engine.WaitForSubscriber());
  engine.Send(0, StoreBatch(1, 100, /*ts=*/999.0));
  for (std::uint64_t seq = 1; seq < 10; ++seq) engine.Send(seq, EmptyBatch());
  ASSERT_TRUE(WaitFor([&] { return feed_.Counters(kW)->batches == 10; }));
  EXPECT_EQ(feed_.Counters(kW)->events, 1u);
  EXPECT_EQ(feed_.Counters(kW)->last_lag_s, 1.0);
  ASSERT_EQ(Held(100).first, 1u);
  engine.Send(0, StoreBatch(2, 200));  // the restarted engine numbers from 0 again
  ASSERT_TRUE(WaitFor([&] { return Held(200).first == 1; }));
  EXPECT_EQ(feed_.Counters(kW)->restarts, 1u);
  EXPECT_EQ(Held(100).first, 0u);  // the old engine's cache is gone
}

TEST_F(KvFeedTest, LostBatchesMarkTheWorkerStaleUntilAResync) {
  RawEngine engine;  // no replay socket: a lost batch cannot be recovered
  Connect(engine.endpoint());
  ASSERT_TRUE(engine.WaitForSubscriber());
  engine.Send(0, StoreBatch(1, 100));
  engine.Send(1, EmptyBatch());
  engine.Send(3, EmptyBatch());  // seq 2 lost
  ASSERT_TRUE(WaitFor([&] { return feed_.Counters(kW)->stale; }));
  EXPECT_EQ(feed_.Counters(kW)->stale_episodes, 1u);
  EXPECT_EQ(Held(100), std::make_pair(1u, true));  // kept, but flagged
  // The engine clears its cache (e.g. reset_prefix_cache): the view is complete again.
  engine.Send(4, ClearBatch());
  engine.Send(5, StoreBatch(3, 300));
  ASSERT_TRUE(WaitFor([&] { return Held(300).first == 1; }));
  KvFeedCounters c = *feed_.Counters(kW);
  EXPECT_FALSE(c.stale);
  EXPECT_EQ(c.resyncs, 1u);
  EXPECT_EQ(Held(300), std::make_pair(1u, false));
  EXPECT_EQ(Held(100).first, 0u);
}

TEST_F(KvFeedTest, RemoveWorkerStopsTheFeedAndClearsTheIndex) {
  RawEngine engine;
  Connect(engine.endpoint());
  ASSERT_TRUE(engine.WaitForSubscriber());
  engine.Send(0, StoreBatch(1, 100));
  ASSERT_TRUE(WaitFor([&] { return Held(100).first == 1; }));
  feed_.RemoveWorker(kW);
  EXPECT_EQ(Held(100).first, 0u);
  EXPECT_FALSE(feed_.Counters(kW).has_value());
  EXPECT_FALSE(feed_.Endpoint(kW).has_value());
  engine.Send(1, StoreBatch(2, 200));  // nobody listens any more
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(Held(200).first, 0u);
}

// A worker merged from a sibling's snapshot (taken after seq 2) and then subscribed: the
// engine's replay buffer still holds seqs 0..2, and replaying them on top of the image would
// count each block's copies twice, so that a later eviction left the block credited.
TEST_F(KvFeedTest, AWorkerMergedFromASnapshotIsNotReplayedTwice) {
  auto pub = kv::ZmqEventPublisher::Create(
      {.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*"});
  ASSERT_TRUE(pub.has_value()) << pub.error();
  kv::KvIndex sibling(keyer_);
  const std::vector<kv::KvEventBatch> before = {StoreBatch(1, 100), StoreBatch(2, 200),
                                                StoreBatch(1, 100)};  // two copies of hash 1
  for (std::uint64_t seq = 0; seq < before.size(); ++seq) {
    ASSERT_TRUE((*pub)->Publish(before[seq]));  // nobody subscribed: replay buffer only
    sibling.ApplyBatch(kW, before[seq], seq);   // what the sibling's feed applied
  }
  auto snapshot = kv::IndexSnapshot::Parse(sibling.Dump(), keyer_);
  ASSERT_TRUE(snapshot.has_value()) << snapshot.error();
  ASSERT_TRUE(index_.RestoreWorker(*snapshot, kW, kW).has_value());
  Connect((*pub)->endpoint(), (*pub)->replay_endpoint());
  // Both copies of hash 1 evicted after the snapshot.
  kv::KvEventBatch evict;
  evict.events.push_back(kv::BlockRemoved{.block_hashes = {1}, .medium = "GPU"});
  ASSERT_TRUE((*pub)->Publish(evict));
  ASSERT_TRUE((*pub)->Publish(evict));
  sibling.ApplyBatch(kW, evict, 3);
  sibling.ApplyBatch(kW, evict, 4);
  // The subscription may miss the first of them (slow joiner): a later batch reveals the gap.
  std::uint64_t seq = 5;
  for (; seq < 100 && Held(100).first != 0; ++seq) {
    std::this_thread::sleep_for(milliseconds(50));
    ASSERT_TRUE((*pub)->Publish(EmptyBatch()));
    sibling.ApplyBatch(kW, EmptyBatch(), seq);
  }
  EXPECT_EQ(Held(100).first, 0u);  // evicted: no copy left over from a replay
  ASSERT_TRUE(WaitFor([&] { return index_.AppliedSeq(kW) == seq - 1; }));
  EXPECT_EQ(Held(200), std::make_pair(1u, false));
  EXPECT_EQ(index_.counters().duplicate_batches, 0u);  // the subscriber never asked for them
  EXPECT_EQ(index_.counters().unknown_removals, 0u);
  EXPECT_EQ(index_.Dump(), sibling.Dump());
  EXPECT_FALSE(feed_.Counters(kW)->stale);
}

TEST_F(KvFeedTest, AWorkerWithoutEndpointIsRefused) {
  EXPECT_FALSE(feed_.AddWorker(kW, {}, "127.0.0.1").has_value());
}

}  // namespace
}  // namespace kvroute::gateway
