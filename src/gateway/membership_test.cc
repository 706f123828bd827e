// Gateway::JoinWorker / DrainWorker / LeaveWorker against real `kvroute sim` servers on
// loopback, and EtcdDiscovery against a real etcd (skipped without /usr/bin/etcd), with
// recorded membership calls.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "client/blocking_http_client.h"
#include "etcd/client.h"
#include "etcd/etcd_process.h"
#include "gateway/etcd_discovery.h"
#include "gateway/gateway.h"
#include "gateway/membership.h"
#include "sim/sim_server.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::gateway {
namespace {

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(15)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

std::unique_ptr<sim::SimServer> StartSim() {
  sim::SimConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.served_model_name = "m";
  c.speedup = 100;
  c.kv_events_endpoint = "tcp://127.0.0.1:*";
  c.kv_events_replay_endpoint = "tcp://127.0.0.1:*";
  auto s = sim::SimServer::Create(c, std::make_shared<tokenize::SimpleTokenizer>());
  EXPECT_TRUE(s.has_value()) << s.error();
  EXPECT_TRUE((*s)->Start().has_value());
  return std::move(*s);
}

// The sim binds its PUB socket: in vLLM's spelling "tcp://*:PORT" (the gateway connects).
fleet::WorkerSpec SpecFor(const std::string& name, const sim::SimServer& s) {
  const std::string bound = s.kv_events_endpoint();
  etcd::WorkerRecord r{.name = name,
                       .url = "http://127.0.0.1:" + std::to_string(s.port()),
                       .models = {"m"},
                       .kv_events_endpoint = "tcp://*" + bound.substr(bound.rfind(':')),
                       .kv_events_replay_endpoint = s.kv_events_replay_endpoint()};
  return SpecFromRecord(r, 16);
}

// A record's P/D fields become the spec's, as a static worker's tp/gpus/link keys do.
TEST(SpecFromRecordTest, CarriesRoleTpGpusAndLink) {
  etcd::WorkerRecord r{.name = "d0", .url = "http://127.0.0.1:1", .models = {"m"},
                       .role = "decode", .tp = 2, .gpus = 4, .link = "roce-100g",
                       .link_bytes_per_s = 1e9, .link_latency_s = 0.003};
  fleet::WorkerSpec spec = SpecFromRecord(r, 16);
  EXPECT_EQ(spec.role, sched::Role::kDecode);
  EXPECT_EQ(spec.tp, 2u);
  EXPECT_EQ(spec.gpus, 4u);
  EXPECT_EQ(spec.link, "roce-100g");
  EXPECT_EQ(spec.link_bytes_per_s, 1e9);
  EXPECT_EQ(spec.link_latency_s, 0.003);
  // Not said: left to the profile (0 / empty / none), as for a static worker.
  spec = SpecFromRecord(etcd::WorkerRecord{.name = "m0", .url = "http://127.0.0.1:1",
                                           .models = {"m"}},
                        16);
  EXPECT_EQ(spec.role, sched::Role::kMixed);
  EXPECT_EQ(spec.tp, 0u);
  EXPECT_EQ(spec.gpus, 0u);
  EXPECT_TRUE(spec.link.empty());
  EXPECT_FALSE(spec.link_bytes_per_s.has_value());
}

class MembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = StartSim();
    b_ = StartSim();
    GatewayConfig c;
    c.port = 0;
    c.shutdown_grace_s = 0;
    c.drain_timeout_s = 1;
    c.parity_probe = false;
    c.workers.push_back(WorkerConfig{
        .name = "a", .url = "http://127.0.0.1:" + std::to_string(a_->port()), .models = {"m"}});
    auto gw = Gateway::Create(c);
    ASSERT_TRUE(gw.has_value()) << gw.error();
    gw_ = std::move(*gw);
    ASSERT_TRUE(gw_->Start().has_value());
  }
  void TearDown() override {
    if (gw_) gw_->Stop();
  }
  // The worker that answered a one-token chat completion ("" on failure).
  std::string Route(int* status = nullptr) {
    auto req = client::MakeRequest("POST", "http://127.0.0.1:" + std::to_string(gw_->port()) +
                                               "/v1/chat/completions",
                                   R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1})",
                                   "application/json");
    auto res = http_.Send(std::move(*req));
    if (!res) return "";
    if (status) *status = res->status;
    return std::string(res->Header("x-kvroute-worker"));
  }
  std::string Metrics() {
    auto res = http_.Send(
        *client::MakeRequest("GET", "http://127.0.0.1:" + std::to_string(gw_->port()) + "/metrics"));
    return res ? res->body : "";
  }
  std::unique_ptr<sim::SimServer> a_, b_;
  std::unique_ptr<Gateway> gw_;
  client::BlockingHttpClient http_;
};

TEST_F(MembershipTest, JoinRefusesATakenNameOrABadSpecAndChangesNothing) {
  auto dup = gw_->JoinWorker(SpecFor("a", *b_));
  ASSERT_FALSE(dup.has_value());
  EXPECT_NE(dup.error().find("already in the fleet"), std::string::npos) << dup.error();
  fleet::WorkerSpec bad = SpecFor("b", *b_);
  bad.models.clear();
  EXPECT_FALSE(gw_->JoinWorker(bad).has_value());
  bad = SpecFor("b", *b_);
  bad.base_url = "not a url";
  EXPECT_FALSE(gw_->JoinWorker(bad).has_value());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Route(), "a");
  EXPECT_FALSE(gw_->DrainWorker("nobody"));
  EXPECT_FALSE(gw_->LeaveWorker("nobody"));
}

TEST_F(MembershipTest, AJoinedWorkerGetsTrafficAndADrainedOneGetsNone) {
  auto joined = gw_->JoinWorker(SpecFor("b", *b_));
  ASSERT_TRUE(joined.has_value()) << joined.error();
  EXPECT_NE(Metrics().find("kvroute_worker_healthy{worker=\"b\"}"), std::string::npos);
  ASSERT_TRUE(gw_->DrainWorker("a"));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Route(), "b");
  EXPECT_NE(Metrics().find("kvroute_worker_draining{worker=\"a\"} 1"), std::string::npos);
}

TEST_F(MembershipTest, ALeftWorkerGetsNoTrafficAndItsNameIsFreeAgain) {
  auto joined = gw_->JoinWorker(SpecFor("b", *b_));
  ASSERT_TRUE(joined.has_value()) << joined.error();
  ASSERT_TRUE(gw_->LeaveWorker("a"));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Route(), "b");
  const std::string m = Metrics();
  EXPECT_EQ(m.find("kvroute_worker_healthy{worker=\"a\"}"), std::string::npos);
  EXPECT_FALSE(gw_->LeaveWorker("a"));
  // The same name may join again (a restarted server), here at another address.
  auto again = gw_->JoinWorker(SpecFor("a", *a_));
  ASSERT_TRUE(again.has_value()) << again.error();
  ASSERT_TRUE(gw_->LeaveWorker("b"));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Route(), "a");
}

// Discovery with recorded calls (no gateway): what each etcd change turns into.
struct Calls {
  std::mutex mu;
  std::vector<std::string> log;
  std::set<std::string> refuse;
  MembershipCalls Make() {
    return MembershipCalls{
        .join = [this](fleet::WorkerSpec s) -> std::expected<void, std::string> {
          std::lock_guard l(mu);
          if (refuse.contains(s.name)) return std::unexpected("name taken");
          log.push_back("join " + s.name + " " + s.base_url + " " + s.kv_events.endpoint);
          return {};
        },
        .drain = [this](std::string_view n) {
          std::lock_guard l(mu);
          log.push_back("drain " + std::string(n));
          return true;
        },
        .leave = [this](std::string_view n) {
          std::lock_guard l(mu);
          log.push_back("leave " + std::string(n));
          return true;
        }};
  }
  std::vector<std::string> Log() {
    std::lock_guard l(mu);
    return log;
  }
};

std::string Record(const std::string& name, int port, bool draining = false) {
  return etcd::ToJson(etcd::WorkerRecord{.name = name,
                                         .url = "http://127.0.0.1:" + std::to_string(port),
                                         .models = {"m"},
                                         .kv_events_endpoint = "tcp://*:7",
                                         .draining = draining});
}

TEST(EtcdDiscoveryTest, TurnsRecordChangesIntoJoinsDrainsAndLeaves) {
  if (!etcd::testing::EtcdProcess::Available()) GTEST_SKIP() << "no etcd";
  etcd::testing::EtcdProcess etcd_process;
  std::string error;
  ASSERT_TRUE(etcd_process.Start(&error)) << error;
  etcd::EtcdClient client(
      etcd::ClientOptions{.endpoints = etcd::ParseEndpoints(etcd_process.endpoint()).value()});
  ASSERT_TRUE(client.Put("/w/x", Record("x", 1)).has_value());
  ASSERT_TRUE(client.Put("/w/bad", R"({"name":"bad","url":"http://h:1"})").has_value());
  Calls calls;
  calls.refuse = {"taken"};
  auto d = EtcdDiscovery::Create(
      EtcdDiscoveryOptions{.endpoints = {etcd_process.endpoint()}, .prefix = "/w/"},
      calls.Make());
  ASSERT_TRUE(d.has_value()) << d.error();
  (*d)->Start();
  // The first listing joined before Start returned; the malformed record was skipped.
  EXPECT_EQ(calls.Log(), (std::vector<std::string>{"join x http://127.0.0.1:1 tcp://*:7"}));
  EXPECT_EQ((*d)->status().malformed, 1u);
  EXPECT_EQ((*d)->status().workers, 1u);

  ASSERT_TRUE(client.Put("/w/x", Record("x", 1, /*draining=*/true)).has_value());
  ASSERT_TRUE(client.Put("/w/x", Record("x", 2)).has_value());  // a new incarnation
  ASSERT_TRUE(client.Put("/w/t", Record("taken", 3)).has_value());
  ASSERT_TRUE(client.Delete("/w/x").has_value());
  ASSERT_TRUE(WaitFor([&] { return calls.Log().size() >= 5; }));
  EXPECT_EQ(calls.Log(), (std::vector<std::string>{"join x http://127.0.0.1:1 tcp://*:7",
                                                   "drain x", "leave x",
                                                   "join x http://127.0.0.1:2 tcp://*:7",
                                                   "leave x"}));
  ASSERT_TRUE(WaitFor([&] { return (*d)->status().refused == 1; }));
  EXPECT_EQ((*d)->status().workers, 0u);
  // A record registered draining joins and is drained at once.
  ASSERT_TRUE(client.Put("/w/y", Record("y", 4, true)).has_value());
  ASSERT_TRUE(WaitFor([&] { return calls.Log().size() >= 7; }));
  EXPECT_EQ(calls.Log()[5], "join y http://127.0.0.1:4 tcp://*:7");
  EXPECT_EQ(calls.Log()[6], "drain y");
  EXPECT_TRUE((*d)->status().watch.connected);
  (*d)->Stop();
}

TEST(EtcdDiscoveryTest, UnreachableEtcdIsNotFatal) {
  etcd::testing::EtcdProcess unused;  // a free port: nothing listens
  Calls calls;
  auto d = EtcdDiscovery::Create(
      EtcdDiscoveryOptions{.endpoints = {unused.endpoint()}, .prefix = "/w/"}, calls.Make());
  ASSERT_TRUE(d.has_value());
  (*d)->Start();
  EXPECT_FALSE((*d)->status().watch.connected);
  EXPECT_GE((*d)->status().watch.failures, 1u);
  EXPECT_TRUE(calls.Log().empty());
  (*d)->Stop();
  EXPECT_FALSE(EtcdDiscovery::Create(EtcdDiscoveryOptions{.endpoints = {}}, calls.Make()));
}

}  // namespace
}  // namespace kvroute::gateway
