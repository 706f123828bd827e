// The sim's etcd record and its registrar against a real etcd (skipped without /usr/bin/etcd).
#include "sim/sim_registration.h"

#include <gtest/gtest.h>

#include "etcd/client.h"
#include "etcd/etcd_process.h"
#include "sim/sim_server.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::sim {
namespace {

std::unique_ptr<SimServer> StartSim(SimConfig c) {
  auto s = SimServer::Create(c, std::make_shared<tokenize::SimpleTokenizer>());
  EXPECT_TRUE(s.has_value()) << s.error();
  if (!s) return nullptr;
  EXPECT_TRUE((*s)->Start().has_value());
  return std::move(*s);
}

SimConfig BaseConfig() {
  SimConfig c;
  c.host = "0.0.0.0";
  c.port = 0;
  c.served_model_name = "m";
  c.lora_modules = {"ad1=/path/ad1"};
  c.kv_events_endpoint = "tcp://127.0.0.1:*";
  c.kv_events_replay_endpoint = "tcp://127.0.0.1:*";
  c.speedup = 50;
  c.block_size = 32;
  return c;
}

TEST(SimRegistrationTest, RecordDescribesTheRunningServer) {
  SimConfig c = BaseConfig();
  auto server = StartSim(c);
  ASSERT_NE(server, nullptr);
  etcd::WorkerRecord r = SimWorkerRecord(c, *server, SimEtcdOptions{}, 2);
  EXPECT_EQ(r.name, "sim-" + std::to_string(server->port()));
  EXPECT_EQ(r.url, "http://127.0.0.1:" + std::to_string(server->port()));  // wildcard host
  EXPECT_EQ(r.models, (std::vector<std::string>{"m", "ad1"}));
  EXPECT_EQ(r.role, "mixed");
  EXPECT_EQ(r.tp, 2u);
  EXPECT_EQ(r.block_size, 32u);
  // The engine binds: the router connects to the URL's host, on the port as bound.
  const std::string bound = server->kv_events_endpoint();
  EXPECT_EQ(r.kv_events_endpoint, "tcp://*" + bound.substr(bound.rfind(':')));
  EXPECT_EQ(r.kv_events_endpoint.find("*:*"), std::string::npos);
  EXPECT_EQ(r.kv_events_replay_endpoint, server->kv_events_replay_endpoint());
  EXPECT_EQ(r.profile_speedup, 50);
  EXPECT_FALSE(r.draining);
  EXPECT_TRUE(r.link.empty());  // no --kv-link: the profile's first link, not written
  c.kv_link = "roce-100g";
  EXPECT_EQ(SimWorkerRecord(c, *server, SimEtcdOptions{}, 2).link, "roce-100g");
  SimEtcdOptions named{.name = "w7", .advertise_url = "http://10.1.2.3:80"};
  r = SimWorkerRecord(c, *server, named, 1);
  EXPECT_EQ(r.name, "w7");
  EXPECT_EQ(r.url, "http://10.1.2.3:80");
  server->Shutdown(std::chrono::milliseconds(0));
}

TEST(SimRegistrationTest, RegistersDrainsAndRevokes) {
  if (!etcd::testing::EtcdProcess::Available()) GTEST_SKIP() << "no etcd";
  etcd::testing::EtcdProcess etcd_process;
  std::string error;
  ASSERT_TRUE(etcd_process.Start(&error)) << error;
  SimConfig c = BaseConfig();
  auto server = StartSim(c);
  ASSERT_NE(server, nullptr);
  SimEtcdOptions o{.endpoints = etcd_process.endpoint(), .prefix = "/kv/w/", .ttl_s = 5,
                   .name = "a", .drain_delay_s = 0};
  auto reg = SimRegistrar::Create(o, SimWorkerRecord(c, *server, o, 1));
  ASSERT_TRUE(reg.has_value()) << reg.error();
  (*reg)->Start();
  etcd::EtcdClient client(
      etcd::ClientOptions{.endpoints = etcd::ParseEndpoints(etcd_process.endpoint()).value()});
  auto read = [&]() -> std::optional<etcd::WorkerRecord> {
    auto r = client.RangePrefix("/kv/w/");
    if (!r || r->kvs.empty()) return std::nullopt;
    EXPECT_EQ(r->kvs[0].key, "/kv/w/a");
    EXPECT_NE(r->kvs[0].lease, 0);
    return etcd::ParseWorkerRecord(r->kvs[0].value).value();
  };
  auto rec = read();
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->name, "a");
  EXPECT_FALSE(rec->draining);
  (*reg)->SetDraining();
  rec = read();
  ASSERT_TRUE(rec.has_value());
  EXPECT_TRUE(rec->draining);
  (*reg)->Stop();
  EXPECT_FALSE(read().has_value());
  server->Shutdown(std::chrono::milliseconds(0));

  auto bad = SimRegistrar::Create(SimEtcdOptions{.endpoints = ""}, etcd::WorkerRecord{});
  EXPECT_FALSE(bad.has_value());
  auto short_ttl = SimRegistrar::Create(SimEtcdOptions{.endpoints = "127.0.0.1:1", .ttl_s = 1},
                                        etcd::WorkerRecord{});
  EXPECT_FALSE(short_ttl.has_value());
}

}  // namespace
}  // namespace kvroute::sim
