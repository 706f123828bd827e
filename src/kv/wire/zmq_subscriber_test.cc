// Subscriber tests over tcp://127.0.0.1 with OS-chosen ports, against ZmqEventPublisher:
// in-order delivery, gap repaired by replay, stale without replay, engine restart, resuming
// after a consumer's sequence, malformed messages. Messages are "lost" on purpose through the publisher's test hook, which skips the
// wire but keeps the batch in the replay buffer.
//
// A SUB socket may miss the first messages while its subscription propagates (ZeroMQ's slow
// joiner); the subscriber treats that as a gap from seq 0, so every assertion below holds
// whether or not that happens.
#include "kv/wire/zmq_subscriber.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "kv/wire/zmq_publisher.h"

namespace kvroute::kv {
namespace {

using std::chrono::milliseconds;

KvEventBatch Batch(std::uint64_t n, bool clear = false) {
  KvEventBatch b;
  b.ts = static_cast<double>(n);
  if (clear) b.events.push_back(AllBlocksCleared{});
  b.events.push_back(BlockRemoved{.block_hashes = {n}, .medium = "GPU", .group_idx = 0});
  return b;
}

// Everything the callbacks saw, in order.
struct Recorder {
  struct Entry {
    enum Kind { kBatch, kRestart, kStale, kFresh } kind;
    std::uint64_t seq = 0;
    double ts = 0;
  };

  SubscriberCallbacks Callbacks() {
    return SubscriberCallbacks{
        .on_batch =
            [this](WorkerId w, std::uint64_t seq, const KvEventBatch& b) {
              EXPECT_EQ(w, 7u);
              Add({Entry::kBatch, seq, b.ts});
            },
        .on_restart = [this](WorkerId) { Add({Entry::kRestart}); },
        .on_stale = [this](WorkerId, bool stale) { Add({stale ? Entry::kStale : Entry::kFresh}); },
    };
  }

  void Add(Entry e) {
    std::lock_guard lock(mu);
    entries.push_back(e);
  }

  std::vector<Entry> Snapshot() {
    std::lock_guard lock(mu);
    return entries;
  }

  // Seqs of delivered batches, in delivery order.
  std::vector<std::uint64_t> Seqs() {
    std::vector<std::uint64_t> seqs;
    for (const Entry& e : Snapshot()) {
      if (e.kind == Entry::kBatch) seqs.push_back(e.seq);
    }
    return seqs;
  }

  int Count(Entry::Kind kind) {
    int n = 0;
    for (const Entry& e : Snapshot()) n += e.kind == kind ? 1 : 0;
    return n;
  }

  // Waits (bounded) until `pred` holds; the result is asserted by the caller.
  template <typename Pred>
  bool WaitFor(Pred pred) {
    for (int i = 0; i < 1000; ++i) {
      if (pred()) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return pred();
  }

  std::mutex mu;
  std::vector<Entry> entries;
};

std::vector<std::uint64_t> Iota(std::uint64_t n) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

TEST(SubscriberEndpointForTest, ConnectsToAnEngineThatBindsWithItsHostForTheWildcard) {
  EXPECT_EQ(SubscriberEndpointFor("tcp://*:5557", "10.0.0.5"),
            (SubscriberEndpoint{"tcp://10.0.0.5:5557", SocketMode::kConnect}));
  EXPECT_EQ(SubscriberEndpointFor("tcp://[::]:5557", "fd00::5"),
            (SubscriberEndpoint{"tcp://[fd00::5]:5557", SocketMode::kConnect}));
  EXPECT_EQ(SubscriberEndpointFor("ipc:///run/kv.sock", "ignored"),
            (SubscriberEndpoint{"ipc:///run/kv.sock", SocketMode::kConnect}));
  EXPECT_EQ(SubscriberEndpointFor("tcp://[fd00::7]:5557", "h"),  // "::" makes vLLM bind
            (SubscriberEndpoint{"tcp://[fd00::7]:5557", SocketMode::kConnect}));
}

TEST(SubscriberEndpointForTest, BindsWhenTheEngineConnects) {
  EXPECT_EQ(SubscriberEndpointFor("tcp://indexer.kv.svc:5557", "10.0.0.5"),
            (SubscriberEndpoint{"tcp://*:5557", SocketMode::kBind}));
  // vLLM's rule knows only '*' and "::": an engine told 0.0.0.0 connects.
  EXPECT_EQ(SubscriberEndpointFor("tcp://0.0.0.0:5557", "10.0.0.5"),
            (SubscriberEndpoint{"tcp://*:5557", SocketMode::kBind}));
}

TEST(SubscriberEndpointForTest, ReplayIsAlwaysConnectedWithWildcardHostReplaced) {
  EXPECT_EQ(ReplayEndpointFor("tcp://*:5558", "10.0.0.5"), "tcp://10.0.0.5:5558");
  EXPECT_EQ(ReplayEndpointFor("tcp://0.0.0.0:5558", "10.0.0.5"), "tcp://10.0.0.5:5558");
  EXPECT_EQ(ReplayEndpointFor("tcp://engine-3:5558", "10.0.0.5"), "tcp://engine-3:5558");
}

class SubscriberTest : public ::testing::Test {
 protected:
  void Start(ZmqPublisherOptions po, bool subscriber_uses_replay = true) {
    StartPublisher(std::move(po));
    if (!HasFatalFailure()) Subscribe(subscriber_uses_replay);
  }

  void StartPublisher(ZmqPublisherOptions po) {
    auto p = ZmqEventPublisher::Create(std::move(po));
    ASSERT_TRUE(p.has_value()) << p.error();
    pub_ = std::move(*p);
  }

  // A subscriber to pub_ (started first); `resume_after`: as ZmqSubscriberOptions's.
  void Subscribe(bool uses_replay = true,
                 std::optional<std::uint64_t> resume_after = std::nullopt) {
    ZmqSubscriberOptions so{
        .worker = 7,
        .endpoint = pub_->endpoint(),
        .replay_endpoint = uses_replay ? pub_->replay_endpoint() : std::string(),
        .replay_timeout = milliseconds(2000),
        .poll_interval = milliseconds(20),
        .resume_after = resume_after};
    auto s = ZmqEventSubscriber::Create(std::move(so), rec_.Callbacks());
    ASSERT_TRUE(s.has_value()) << s.error();
    sub_ = std::move(*s);
    std::this_thread::sleep_for(milliseconds(200));  // let the subscription reach the PUB
  }

  void PublishRange(std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t i = from; i < to; ++i) ASSERT_TRUE(pub_->Publish(Batch(i)));
  }

  Recorder rec_;
  std::unique_ptr<ZmqEventPublisher> pub_;
  std::unique_ptr<ZmqEventSubscriber> sub_;
};

TEST_F(SubscriberTest, DeliversEveryBatchInSequenceOrder) {
  Start({.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*"});
  PublishRange(0, 50);
  ASSERT_TRUE(rec_.WaitFor([&] { return rec_.Seqs().size() >= 50; }));
  EXPECT_EQ(rec_.Seqs(), Iota(50));
  for (const auto& e : rec_.Snapshot()) {
    if (e.kind == Recorder::Entry::kBatch) {
      EXPECT_EQ(e.ts, static_cast<double>(e.seq));
    }
  }
  EXPECT_EQ(rec_.Count(Recorder::Entry::kStale), 0);
  EXPECT_EQ(sub_->stats().batches, 50u);
  EXPECT_EQ(sub_->stats().events, 50u);
}

TEST_F(SubscriberTest, GapIsRepairedFromTheReplaySocketBeforeLaterBatches) {
  ZmqPublisherOptions po{.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*"};
  po.drop_on_wire_for_test = [](std::uint64_t seq) { return seq == 5 || seq == 6; };
  Start(std::move(po));
  PublishRange(0, 20);
  ASSERT_TRUE(rec_.WaitFor([&] { return rec_.Seqs().size() >= 20; }));
  EXPECT_EQ(rec_.Seqs(), Iota(20));
  const auto stats = sub_->stats();
  EXPECT_GE(stats.gaps, 1u);
  EXPECT_GE(stats.replayed, 2u);
  EXPECT_EQ(stats.stale_episodes, 0u);
}

TEST_F(SubscriberTest, GapOlderThanTheReplayBufferMarksTheWorkerStale) {
  // Seqs 1..4 never reach the wire and the engine keeps only 2 batches: when seq 5 reveals the
  // gap, seq 1 is gone from the buffer and the gap cannot be closed.
  ZmqPublisherOptions po{
      .endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*", .buffer_steps = 2};
  po.drop_on_wire_for_test = [](std::uint64_t seq) { return seq >= 1 && seq <= 4; };
  Start(std::move(po));
  PublishRange(0, 6);
  ASSERT_TRUE(rec_.WaitFor([&] {
    auto s = rec_.Seqs();
    return !s.empty() && s.back() == 5;
  }));
  auto seqs = rec_.Seqs();
  EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
  EXPECT_EQ(std::count(seqs.begin(), seqs.end(), 1u), 0);
  EXPECT_EQ(rec_.Count(Recorder::Entry::kStale), 1);
  EXPECT_EQ(sub_->stats().stale_episodes, 1u);
}

TEST_F(SubscriberTest, GapWithoutReplayMarksTheWorkerStaleAndKeepsDelivering) {
  ZmqPublisherOptions po{.endpoint = "tcp://127.0.0.1:*"};
  po.drop_on_wire_for_test = [](std::uint64_t seq) { return seq == 5; };
  Start(std::move(po), /*subscriber_uses_replay=*/false);
  PublishRange(0, 10);
  ASSERT_TRUE(rec_.WaitFor([&] {
    auto s = rec_.Seqs();
    return !s.empty() && s.back() == 9;
  }));
  auto seqs = rec_.Seqs();
  EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
  EXPECT_EQ(std::count(seqs.begin(), seqs.end(), 5u), 0);
  EXPECT_EQ(rec_.Count(Recorder::Entry::kStale), 1);  // one episode, however many gaps
  EXPECT_EQ(rec_.Count(Recorder::Entry::kFresh), 0);
  EXPECT_EQ(sub_->stats().stale_episodes, 1u);
}

TEST_F(SubscriberTest, AllBlocksClearedEndsAStaleEpisode) {
  ZmqPublisherOptions po{.endpoint = "tcp://127.0.0.1:*"};
  po.drop_on_wire_for_test = [](std::uint64_t seq) { return seq == 3; };
  Start(std::move(po), /*subscriber_uses_replay=*/false);
  PublishRange(0, 6);
  ASSERT_TRUE(pub_->Publish(Batch(6, /*clear=*/true)));
  ASSERT_TRUE(rec_.WaitFor([&] { return rec_.Count(Recorder::Entry::kFresh) == 1; }));
  auto entries = rec_.Snapshot();
  // The fresh notice comes right after the batch that cleared.
  ASSERT_GE(entries.size(), 2u);
  EXPECT_EQ(entries.back().kind, Recorder::Entry::kFresh);
  EXPECT_EQ(entries[entries.size() - 2].kind, Recorder::Entry::kBatch);
  EXPECT_EQ(entries[entries.size() - 2].seq, 6u);
}

TEST_F(SubscriberTest, SeqGoingBackIsReportedAsEngineRestart) {
  // The subscriber binds and engines connect to it, so a second engine can take over the
  // stream the way a restarted one would.
  ZmqSubscriberOptions so{.worker = 7,
                          .endpoint = "tcp://127.0.0.1:*",
                          .replay_timeout = milliseconds(200),
                          .poll_interval = milliseconds(20)};
  auto s = ZmqEventSubscriber::Create(std::move(so), rec_.Callbacks());
  ASSERT_TRUE(s.has_value()) << s.error();
  sub_ = std::move(*s);
  for (int engine = 0; engine < 2; ++engine) {
    auto p = ZmqEventPublisher::Create({.endpoint = sub_->endpoint()});
    ASSERT_TRUE(p.has_value()) << p.error();
    pub_ = std::move(*p);
    std::this_thread::sleep_for(milliseconds(300));  // connect + subscription handshake
    PublishRange(0, engine == 0 ? 8 : 4);
    ASSERT_TRUE(rec_.WaitFor([&] {
      auto seqs = rec_.Seqs();
      return !seqs.empty() && seqs.back() == (engine == 0 ? 7u : 3u);
    }));
    pub_->Shutdown();
  }
  EXPECT_EQ(rec_.Count(Recorder::Entry::kRestart), 1);
  EXPECT_EQ(sub_->stats().restarts, 1u);
  // Everything after the restart notice belongs to the new engine.
  auto entries = rec_.Snapshot();
  auto it = std::find_if(entries.begin(), entries.end(),
                         [](const auto& e) { return e.kind == Recorder::Entry::kRestart; });
  ASSERT_NE(it, entries.end());
  for (++it; it != entries.end(); ++it) {
    if (it->kind == Recorder::Entry::kBatch) {
      EXPECT_LE(it->seq, 3u);
    }
  }
}

// A subscriber resuming after seq S (its consumer merged a snapshot taken at S) asks the
// replay socket for S + 1 onwards only: the batches before are in the snapshot already.
TEST_F(SubscriberTest, ResumeAfterRepairsOnlyTheBatchesThatFollowIt) {
  ASSERT_NO_FATAL_FAILURE(
      StartPublisher({.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*"}));
  PublishRange(0, 10);  // nobody subscribed yet: kept in the replay buffer only
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_NO_FATAL_FAILURE(Subscribe(true, 5));
  PublishRange(10, 12);
  ASSERT_TRUE(rec_.WaitFor([&] {
    auto seqs = rec_.Seqs();
    return !seqs.empty() && seqs.back() == 11;
  }));
  EXPECT_EQ(rec_.Seqs(), (std::vector<std::uint64_t>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(rec_.Count(Recorder::Entry::kStale), 0);
  EXPECT_EQ(rec_.Count(Recorder::Entry::kRestart), 0);
  EXPECT_GE(sub_->stats().replayed, 4u);
}

// Resuming after a seq the engine has not reached: its counter started again since (a
// restart), so what the consumer holds is the old engine's.
TEST_F(SubscriberTest, ResumeAfterASeqAheadOfTheStreamIsAnEngineRestart) {
  ASSERT_NO_FATAL_FAILURE(
      StartPublisher({.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*"}));
  ASSERT_NO_FATAL_FAILURE(Subscribe(true, 50));
  PublishRange(0, 4);
  ASSERT_TRUE(rec_.WaitFor([&] {
    auto seqs = rec_.Seqs();
    return !seqs.empty() && seqs.back() == 3;
  }));
  EXPECT_EQ(rec_.Seqs(), Iota(4));  // the new stream, repaired from 0
  ASSERT_FALSE(rec_.Snapshot().empty());
  EXPECT_EQ(rec_.Snapshot().front().kind, Recorder::Entry::kRestart);
  EXPECT_EQ(sub_->stats().restarts, 1u);
}

TEST_F(SubscriberTest, MalformedMessagesAreCountedAndDropped) {
  ZmqSubscriberOptions so{
      .worker = 7, .endpoint = "tcp://127.0.0.1:*", .poll_interval = milliseconds(20)};
  auto s = ZmqEventSubscriber::Create(std::move(so), rec_.Callbacks());
  ASSERT_TRUE(s.has_value()) << s.error();
  sub_ = std::move(*s);
  zmq::context_t ctx(1);
  zmq::socket_t raw(ctx, zmq::socket_type::pub);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(sub_->endpoint());
  std::this_thread::sleep_for(milliseconds(300));
  const std::uint8_t seq0[8] = {};
  raw.send(zmq::str_buffer("t"), zmq::send_flags::sndmore);  // two frames only
  raw.send(zmq::buffer(seq0, 8), zmq::send_flags::none);
  raw.send(zmq::str_buffer("t"), zmq::send_flags::sndmore);  // 4-byte seq
  raw.send(zmq::buffer(seq0, 4), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("\x93"), zmq::send_flags::none);
  raw.send(zmq::str_buffer("t"), zmq::send_flags::sndmore);  // good seq, bad payload
  raw.send(zmq::buffer(seq0, 8), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("\xc1"), zmq::send_flags::none);
  ASSERT_TRUE(rec_.WaitFor([&] { return sub_->stats().malformed >= 3; }));
  EXPECT_EQ(sub_->stats().messages, 3u);
  EXPECT_EQ(sub_->stats().batches, 0u);
  EXPECT_EQ(rec_.Count(Recorder::Entry::kStale), 1);  // the lost payload's events
}

TEST_F(SubscriberTest, StopReturnsPromptlyWhileIdle) {
  ZmqSubscriberOptions so{.worker = 7, .endpoint = "tcp://127.0.0.1:*"};
  auto s = ZmqEventSubscriber::Create(std::move(so), rec_.Callbacks());
  ASSERT_TRUE(s.has_value()) << s.error();
  (*s)->Stop();
  (*s)->Stop();  // idempotent
  EXPECT_EQ((*s)->stats().messages, 0u);
}

}  // namespace
}  // namespace kvroute::kv
