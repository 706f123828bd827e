// StoreServer over loopback with the sims' client (HttpSharedStore): a put is matched, the
// store evicts at capacity and the replayed ZMQ events (AllBlocksCleared first, then SHARED
// stores and removals) say so; a lease keeps its blocks until released; malformed bodies are
// 400s; an unreachable store is a miss, not a stall.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "client/blocking_http_client.h"
#include "engine/engine.h"
#include "engine/profile.h"
#include "kv/wire/event_decode.h"
#include "kv/wire/zmq_publisher.h"
#include "store/store_client.h"
#include "store/store_server.h"

namespace kvroute::store {
namespace {

using std::chrono::milliseconds;

engine::BlockMeta Meta(kv::EngineHash hash, std::optional<kv::EngineHash> parent = std::nullopt) {
  engine::BlockMeta m;
  m.key = hash;
  m.hash = hash;
  m.parent_hash = parent;
  m.payload = std::make_shared<const engine::BlockPayload>(
      engine::BlockPayload{.tokens = std::vector<TokenId>(4, 9)});
  return m;
}

// The store's GET /metrics text ("" when it did not answer).
std::string MetricsOf(std::uint16_t port) {
  client::BlockingHttpClient http;
  client::ClientRequest r;
  r.method = "GET";
  r.host = "127.0.0.1";
  r.port = port;
  r.target = "/metrics";
  auto reply = http.Send(std::move(r));
  return reply && reply->status == 200 ? reply->body : "";
}

// A store on loopback (an OS-picked HTTP port, events bound on one too) with this capacity
// and block size.
StoreServerOptions LoopbackStore(double capacity_bytes, std::uint32_t block_size) {
  StoreServerOptions o;
  o.port = 0;
  o.store = {.capacity_bytes = capacity_bytes, .block_size = block_size};
  o.kv_events_endpoint = "tcp://127.0.0.1:*";
  return o;
}

// Waits (bounded) until `done` holds; the test then asserts on state, not on time.
template <typename F>
bool WaitFor(F done) {
  for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(milliseconds(10));
  return done();
}

std::vector<kv::KvEventBatch> Replay(const std::string& endpoint) {
  zmq::context_t ctx(1);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  const std::uint8_t start[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start, 8), zmq::send_flags::none);
  std::vector<kv::KvEventBatch> out;
  for (int i = 0; i < 1000; ++i) {
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, milliseconds(5000)) <= 0) break;
    std::vector<zmq::message_t> frames;
    (void)zmq::recv_multipart(dealer, std::back_inserter(frames));
    if (frames.size() != 3 || frames[2].size() == 0) break;  // the end marker
    kv::KvEventBatch b;
    EXPECT_TRUE(kv::DecodeEventBatch(frames[2].data<std::uint8_t>(), frames[2].size(), &b).ok());
    out.push_back(std::move(b));
  }
  return out;
}

TEST(StoreServerTest, PutMatchEvictAndTheEventStreamAgree) {
  StoreServerOptions o = LoopbackStore(300, 4);
  o.kv_events_replay_endpoint = "tcp://127.0.0.1:*";
  o.sweep_interval = std::chrono::hours(1);  // no heartbeat batches in the count below
  auto server = StoreServer::Start(o);
  ASSERT_TRUE(server.has_value()) << server.error();
  {
    HttpSharedStore client(
        {.port = (*server)->port(), .block_size = 4, .block_bytes = 100, .timeout = milliseconds(2000)});
    client.Put(std::vector<engine::BlockMeta>{Meta(1), Meta(2, 1), Meta(3, 2)}, Nanos(0));
    ASSERT_TRUE(WaitFor([&] { return client.counters().put_batches == 1; }));
    EXPECT_EQ(client.Match(std::vector<kv::EngineHash>{1, 2, 3, 4}, Nanos(0)), 3u);
    client.Put(std::vector<engine::BlockMeta>{Meta(4, 3)}, Nanos(0));  // evicts 1 (LRU)
    ASSERT_TRUE(WaitFor([&] { return client.counters().put_batches == 2; }));
    EXPECT_EQ(client.Match(std::vector<kv::EngineHash>{1, 2}, Nanos(0)), 0u);
    EXPECT_EQ(client.counters().match_failures, 0u);
    EXPECT_EQ(client.counters().put_failures, 0u);
  }
  EXPECT_EQ((*server)->counters().evicted, 1u);
  EXPECT_EQ((*server)->size(), 3u);

  // The publisher numbers batches on its own thread: wait until all three were numbered.
  const auto batches = [&] {
    std::vector<kv::KvEventBatch> b;
    WaitFor([&] {
      b = Replay((*server)->replay_endpoint());
      return b.size() >= 3;
    });
    return b;
  }();
  ASSERT_EQ(batches.size(), 3u);
  ASSERT_EQ(batches[0].events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<kv::AllBlocksCleared>(batches[0].events[0]));
  EXPECT_EQ(batches[1].events.size(), 3u);  // three SHARED stores
  ASSERT_EQ(batches[2].events.size(), 2u);  // removal of 1, then store of 4
  const auto& removed = std::get<kv::BlockRemoved>(batches[2].events[0]);
  EXPECT_EQ(removed.medium, std::optional<std::string>("SHARED"));
  EXPECT_EQ(removed.block_hashes, std::vector<kv::EngineHash>{1});
  const auto& stored = std::get<kv::BlockStored>(batches[2].events[1]);
  EXPECT_EQ(stored.parent_block_hash, std::optional<kv::EngineHash>(3));
  (*server)->Shutdown();
}

TEST(StoreServerTest, RefusesBadBodiesWithAnOpenAiError) {
  auto server = StoreServer::Start(LoopbackStore(300, 4));
  ASSERT_TRUE(server.has_value()) << server.error();
  // A client whose block size differs: every put is refused (400), nothing is stored.
  HttpSharedStore client({.port = (*server)->port(), .block_size = 8, .block_bytes = 100,
                          .timeout = milliseconds(2000)});
  std::vector<engine::BlockMeta> metas = {Meta(1)};
  auto payload = std::make_shared<const engine::BlockPayload>(
      engine::BlockPayload{.tokens = std::vector<TokenId>(8, 1)});
  metas[0].payload = payload;
  client.Put(metas, Nanos(0));
  ASSERT_TRUE(WaitFor([&] { return client.counters().put_batches == 1; }));
  EXPECT_EQ(client.counters().put_failures, 1u);
  EXPECT_EQ((*server)->size(), 0u);
}

TEST(StoreServerTest, ALeaseOverTheWireKeepsItsBlocksUntilReleased) {
  auto server = StoreServer::Start(LoopbackStore(100, 4));  // room for one block
  ASSERT_TRUE(server.has_value()) << server.error();
  HttpSharedStore client(
      {.port = (*server)->port(), .block_size = 4, .block_bytes = 100, .timeout = milliseconds(2000)});
  client.Put(std::vector<engine::BlockMeta>{Meta(1)}, Nanos(0));
  ASSERT_TRUE(WaitFor([&] { return client.counters().put_batches == 1; }));
  const std::uint64_t lease = client.Lease(std::vector<kv::EngineHash>{1, 2}, Nanos(0));
  ASSERT_NE(lease, 0u);
  EXPECT_EQ(client.counters().leases, 1u);
  EXPECT_EQ(client.Lease(std::vector<kv::EngineHash>{7}, Nanos(0)), 0u);  // not held: no lease
  EXPECT_EQ(client.counters().lease_failures, 0u);
  // Full and all of it leased: the new block is refused, 1 stays.
  client.Put(std::vector<engine::BlockMeta>{Meta(2)}, Nanos(0));
  ASSERT_TRUE(WaitFor([&] { return client.counters().put_batches == 2; }));
  EXPECT_EQ((*server)->counters().refused_full, 1u);
  EXPECT_EQ(client.Match(std::vector<kv::EngineHash>{1}, Nanos(0)), 1u);
  EXPECT_NE(MetricsOf((*server)->port()).find("\nkvroute_store_leased_blocks 1.0"), std::string::npos);
  client.Release(lease, Nanos(0));
  ASSERT_TRUE(WaitFor([&] { return (*server)->counters().leases_released == 1; }));
  client.Put(std::vector<engine::BlockMeta>{Meta(2)}, Nanos(0));  // now 1 can be evicted
  ASSERT_TRUE(WaitFor([&] { return (*server)->counters().stored == 2; }));
  EXPECT_EQ(client.Match(std::vector<kv::EngineHash>{1}, Nanos(0)), 0u);
  EXPECT_NE(MetricsOf((*server)->port()).find("\nkvroute_store_leased_blocks 0.0"), std::string::npos);
  (*server)->Shutdown();
}

// The live path end to end: an engine (kvroute sim's model) with the HTTP client in front of
// a store process. A request that queues behind another leases its prefix at the store over
// the wire and releases it when scheduled; it then finds its blocks there.
TEST(StoreServerTest, AnEngineLeasesAQueuedRequestsPrefixOverTheWire) {
  auto server = StoreServer::Start(LoopbackStore(1e12, 16));
  ASSERT_TRUE(server.has_value()) << server.error();
  auto profile = engine::LoadProfile(engine::kDefaultProfileName);
  ASSERT_TRUE(profile.has_value());
  const auto client = std::make_shared<HttpSharedStore>(HttpSharedStoreOptions{
      .port = (*server)->port(), .block_size = 16, .block_bytes = 100,
      .timeout = milliseconds(2000)});
  engine::EngineConfig c;
  c.num_gpu_blocks_override = 64;
  c.max_num_seqs = 1;  // the second request queues
  c.shared.store = client;
  const auto request = [](std::string id, TokenId first, std::uint32_t n, std::uint32_t out) {
    engine::RequestSpec r;
    r.id = std::move(id);
    for (std::uint32_t i = 0; i < n; ++i) r.prompt.push_back(first + static_cast<TokenId>(i));
    r.max_tokens = out;
    r.ignore_eos = true;
    return r;
  };
  const auto drive = [](engine::Engine& e, std::map<std::string, std::uint32_t>* cached) {
    Nanos now{0};
    for (int i = 0; i < 1000 && e.HasWork(); ++i) {
      const engine::StepResult r = e.Step(now);
      for (const auto& t : r.tokens) {
        if (t.is_first && cached != nullptr) (*cached)[t.request_id] = t.cached_tokens;
      }
      now += r.duration;
    }
  };
  // Engine A computes a 64-token prompt: its blocks are written through to the store.
  auto a = engine::NewEngine(*profile, c);
  ASSERT_FALSE(a->Add(request("warm", 1, 64, 1)));
  drive(*a, nullptr);
  ASSERT_TRUE(WaitFor([&] { return (*server)->size() >= 3; }));
  // Engine B: "busy" runs, "conv" (the same prompt) waits behind it and leases.
  auto b = engine::NewEngine(*profile, c);
  ASSERT_FALSE(b->Add(request("busy", 5000, 20, 8)));
  ASSERT_FALSE(b->Add(request("conv", 1, 64, 1)));
  (void)b->Step(Nanos(0));  // "busy" starts; "conv" cannot (max_num_seqs 1)
  EXPECT_EQ(client->counters().leases, 1u);
  EXPECT_EQ((*server)->counters().leases, 1u);
  EXPECT_EQ((*server)->counters().leased_blocks, 3u);  // 64 tokens: 3 creditable blocks
  std::map<std::string, std::uint32_t> cached;
  drive(*b, &cached);  // the store's clock is its own: the engine's times do not matter here
  EXPECT_EQ(cached["conv"], 48u);
  // The release goes out on the client's own thread.
  ASSERT_TRUE(WaitFor([&] { return (*server)->counters().leases_released == 1; }));
  EXPECT_EQ(client->counters().lease_failures, 0u);
  (*server)->Shutdown();
}

TEST(StoreServerTest, MalformedLeaseAndReleaseBodiesAre400s) {
  auto server = StoreServer::Start(LoopbackStore(100, 4));
  ASSERT_TRUE(server.has_value()) << server.error();
  client::BlockingHttpClient http;
  const auto post = [&](std::string target, std::string body) {
    client::ClientRequest r;
    r.method = "POST";
    r.host = "127.0.0.1";
    r.port = (*server)->port();
    r.target = std::move(target);
    r.body = std::move(body);
    r.content_type = "application/json";
    return http.Send(std::move(r));
  };
  for (const auto& [target, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/kv/lease", "[]"},
           {"/v1/kv/lease", R"({"hashes":[-1]})"},
           {"/v1/kv/release", R"({"lease":0})"},
           {"/v1/kv/release", "not json"}}) {
    auto r = post(target, body);
    ASSERT_TRUE(r.has_value()) << target;
    EXPECT_EQ(r->status, 400) << target << " " << body;
    EXPECT_NE(r->body.find("\"error\""), std::string::npos) << r->body;
  }
  // A well-formed release of an id the store never granted is not an error: it may be a lease
  // from before a restart, or one its TTL already ended.
  auto r = post("/v1/kv/release", R"({"lease":12345})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("false"), std::string::npos);
  (*server)->Shutdown();
}

TEST(StoreServerTest, AnUnreachableStoreIsAMissAndPutsAreDroppedNotBlocking) {
  // Port 1 on loopback: nothing listens there, so connect is refused at once.
  HttpSharedStore client({.port = 1, .block_size = 4, .block_bytes = 100,
                          .timeout = milliseconds(500), .max_queued_puts = 1});
  EXPECT_EQ(client.Match(std::vector<kv::EngineHash>{1}, Nanos(0)), 0u);
  EXPECT_EQ(client.counters().match_failures, 1u);
  for (int i = 0; i < 50; ++i) client.Put(std::vector<engine::BlockMeta>{Meta(1)}, Nanos(0));
  const auto c = client.counters();
  // Every put was sent (and failed), dropped, or is the one queued or in flight: Put returned
  // each time without waiting for the store.
  EXPECT_GE(c.put_batches + c.puts_dropped, 48u);
  EXPECT_EQ(c.put_failures, c.put_batches);
}

}  // namespace
}  // namespace kvroute::store
