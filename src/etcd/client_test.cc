// EtcdClient, Registration and PrefixWatcher against a real etcd (/usr/bin/etcd) on loopback.
// Waits are bounded by deadlines, never asserted as timings.
#include "etcd/client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "etcd/etcd_process.h"
#include "etcd/prefix_watcher.h"
#include "etcd/registration.h"

namespace kvroute::etcd {
namespace {

using testing::EtcdProcess;

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(15)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdProcess::Available()) GTEST_SKIP() << "no " << testing::kEtcdBinary;
    std::string error;
    ASSERT_TRUE(etcd_.Start(&error)) << error;
    client_ = std::make_unique<EtcdClient>(Options(etcd_.endpoint()));
  }
  static ClientOptions Options(const std::string& endpoints) {
    return ClientOptions{.endpoints = ParseEndpoints(endpoints).value(),
                         .connect_timeout = std::chrono::milliseconds(300),
                         .call_timeout = std::chrono::milliseconds(2'000)};
  }
  EtcdProcess etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST(EtcdEndpointsTest, ParsesListsWithOrWithoutScheme) {
  auto e = ParseEndpoints("http://127.0.0.1:2379, 10.0.0.2:2380");
  ASSERT_TRUE(e.has_value()) << e.error();
  ASSERT_EQ(e->size(), 2u);
  EXPECT_EQ((*e)[1].Origin(), "10.0.0.2:2380");
  EXPECT_FALSE(ParseEndpoints("").has_value());
  EXPECT_FALSE(ParseEndpoints("http://h:1/path").has_value());
}

TEST_F(EtcdTest, LeasePutRangeRevoke) {
  auto lease = client_->GrantLease(10);
  ASSERT_TRUE(lease.has_value()) << lease.error().text;
  EXPECT_EQ(lease->ttl_s, 10);
  ASSERT_TRUE(client_->Put("/t/a", "one", lease->id).has_value());
  ASSERT_TRUE(client_->Put("/t/b", std::string("\x00\xff", 2)).has_value());
  ASSERT_TRUE(client_->Put("/u/c", "other prefix").has_value());
  auto r = client_->RangePrefix("/t/");
  ASSERT_TRUE(r.has_value()) << r.error().text;
  ASSERT_EQ(r->kvs.size(), 2u);
  EXPECT_EQ(r->kvs[0].key, "/t/a");
  EXPECT_EQ(r->kvs[0].value, "one");
  EXPECT_EQ(r->kvs[0].lease, lease->id);
  EXPECT_EQ(r->kvs[1].value, std::string("\x00\xff", 2));
  EXPECT_GT(r->revision, 0);

  auto ttl = client_->KeepAliveOnce(lease->id);
  ASSERT_TRUE(ttl.has_value()) << ttl.error().text;
  EXPECT_GT(*ttl, 0);
  ASSERT_TRUE(client_->RevokeLease(lease->id).has_value());
  EXPECT_EQ(client_->RangePrefix("/t/")->kvs.size(), 1u);  // revoking deleted /t/a
  EXPECT_EQ(client_->KeepAliveOnce(lease->id).value(), 0);
  auto bad = client_->Put("/t/x", "v", lease->id);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().kind, Error::Kind::kNotFound) << bad.error().text;

  ASSERT_TRUE(client_->Delete("/t/", true).has_value());
  EXPECT_TRUE(client_->RangePrefix("/t/")->kvs.empty());
}

TEST_F(EtcdTest, WatchFromARevisionSeesPutsAndDeletesInOrder) {
  const std::int64_t rev = client_->RangePrefix("/w/")->revision;
  ASSERT_TRUE(client_->Put("/w/a", "1").has_value());
  ASSERT_TRUE(client_->Put("/w/a", "2").has_value());
  ASSERT_TRUE(client_->Delete("/w/a").has_value());
  ASSERT_TRUE(client_->Put("/elsewhere", "x").has_value());
  auto watch = client_->WatchPrefix("/w/", rev + 1);
  ASSERT_TRUE(watch.has_value()) << watch.error().text;
  std::vector<WatchEvent> events;
  while (events.size() < 3) {
    auto m = (*watch)->Next();
    ASSERT_TRUE(m.has_value()) << m.error().text;
    for (auto& e : m->events) events.push_back(e);
  }
  EXPECT_EQ(events[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(events[0].kv.value, "1");
  EXPECT_EQ(events[1].kv.value, "2");
  EXPECT_EQ(events[2].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(events[2].kv.key, "/w/a");
  // Cancel from another thread ends a blocked Next.
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (*watch)->Cancel();
  });
  auto m = (*watch)->Next();
  canceller.join();
  EXPECT_FALSE(m.has_value());
}

TEST_F(EtcdTest, WatchFromACompactedRevisionIsCanceledWithTheCompactRevision) {
  const std::int64_t rev = client_->RangePrefix("/c/")->revision;
  ASSERT_TRUE(client_->Put("/c/a", "1").has_value());
  const std::int64_t now = client_->Put("/c/a", "2").value();
  ASSERT_TRUE(client_->Compact(now).has_value());
  auto watch = client_->WatchPrefix("/c/", rev + 1);
  ASSERT_TRUE(watch.has_value());
  bool canceled = false;
  for (int i = 0; i < 3 && !canceled; ++i) {
    auto m = (*watch)->Next();
    ASSERT_TRUE(m.has_value()) << m.error().text;
    if (m->canceled) {
      canceled = true;
      EXPECT_EQ(m->compact_revision, now);
    }
  }
  EXPECT_TRUE(canceled);
}

TEST_F(EtcdTest, UnreachableEndpointIsSkippedAndReportedUnavailable) {
  EtcdProcess unused;  // its port is free: nothing listens there
  EtcdClient dead(Options(unused.endpoint()));
  auto r = dead.RangePrefix("/");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, Error::Kind::kUnavailable);
  EtcdClient both(Options(unused.endpoint() + "," + etcd_.endpoint()));
  EXPECT_TRUE(both.RangePrefix("/").has_value());
  EXPECT_EQ(both.CurrentEndpoint(), "127.0.0.1:" + std::to_string(etcd_.client_port()));
}

TEST_F(EtcdTest, RegistrationKeepsItsKeyAndDeletesItOnRevoke) {
  Registration reg(client_.get(), RegistrationOptions{.key = "/r/w1", .ttl_s = 4}, "v1");
  ASSERT_TRUE(reg.Start().has_value());
  auto r = client_->RangePrefix("/r/");
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "v1");
  const std::int64_t lease = r->kvs[0].lease;
  EXPECT_NE(lease, 0);
  // Longer than the TTL: keepalives (every TTL/3) hold the key. TTL 4 s, not 2: on a loaded
  // 2-core machine one late keepalive at TTL 2 let the lease lapse.
  std::this_thread::sleep_for(std::chrono::milliseconds(5'000));
  ASSERT_EQ(client_->RangePrefix("/r/")->kvs.size(), 1u);
  ASSERT_TRUE(reg.Update("v2").has_value());
  EXPECT_EQ(client_->RangePrefix("/r/")->kvs[0].value, "v2");
  // Someone revokes the lease (as its expiry would): the keeper registers again, new value kept.
  ASSERT_TRUE(client_->RevokeLease(lease).has_value());
  EXPECT_TRUE(WaitFor([&] {
    auto now = client_->RangePrefix("/r/");
    return now && now->kvs.size() == 1 && now->kvs[0].lease != lease && now->kvs[0].value == "v2";
  }));
  EXPECT_GE(reg.status().registrations, 2u);
  reg.Stop(true);
  EXPECT_TRUE(client_->RangePrefix("/r/")->kvs.empty());
}

TEST_F(EtcdTest, RegistrationWithoutKeepaliveExpires) {
  {
    Registration reg(client_.get(), RegistrationOptions{.key = "/x/w", .ttl_s = 2}, "v");
    ASSERT_TRUE(reg.Start().has_value());
    reg.Stop(false);  // as kill -9 would: no revoke, no more keepalives
  }
  ASSERT_EQ(client_->RangePrefix("/x/")->kvs.size(), 1u);
  EXPECT_TRUE(WaitFor([&] { return client_->RangePrefix("/x/")->kvs.empty(); }));
}

struct Seen {
  std::mutex mu;
  std::map<std::string, std::string> keys;
  int puts = 0, deletes = 0;
  std::string Get(const std::string& k) {
    std::lock_guard l(mu);
    auto it = keys.find(k);
    return it == keys.end() ? "<none>" : it->second;
  }
};

PrefixWatcher MakeWatcher(EtcdClient* c, Seen* seen, WatcherOptions o) {
  return PrefixWatcher(
      c, std::move(o),
      [seen](const KeyValue& kv) {
        std::lock_guard l(seen->mu);
        seen->keys[kv.key] = kv.value;
        ++seen->puts;
      },
      [seen](const std::string& key) {
        std::lock_guard l(seen->mu);
        seen->keys.erase(key);
        ++seen->deletes;
      });
}

TEST_F(EtcdTest, WatcherListsThenFollowsChanges) {
  ASSERT_TRUE(client_->Put("/p/a", "1").has_value());
  Seen seen;
  PrefixWatcher w = MakeWatcher(client_.get(), &seen, WatcherOptions{.prefix = "/p/"});
  ASSERT_TRUE(w.Start().has_value());
  EXPECT_EQ(seen.Get("/p/a"), "1");  // listed on Start's thread, before it returned
  ASSERT_TRUE(client_->Put("/p/b", "2").has_value());
  ASSERT_TRUE(client_->Put("/p/a", "3").has_value());
  ASSERT_TRUE(client_->Delete("/p/b").has_value());
  ASSERT_TRUE(client_->Put("/q/z", "not mine").has_value());
  EXPECT_TRUE(WaitFor([&] { return seen.Get("/p/a") == "3" && seen.deletes == 1; }));
  EXPECT_EQ(seen.Get("/p/b"), "<none>");
  EXPECT_EQ(seen.Get("/q/z"), "<none>");
  EXPECT_TRUE(w.status().connected);
  w.Stop();
}

// etcd goes away while the watcher knows two keys; while it is down the watcher keeps them
// (no deletes) and says it is disconnected. It comes back with the same data; changes made
// then, followed by a compaction past the watcher's revision, reach the watcher by a relist.
TEST_F(EtcdTest, WatcherSurvivesAnEtcdRestartAndACompactedGap) {
  ASSERT_TRUE(client_->Put("/p/a", "1").has_value());
  ASSERT_TRUE(client_->Put("/p/b", "1").has_value());
  Seen seen;
  // A long backoff so the changes and the compaction below happen before it re-watches.
  PrefixWatcher w = MakeWatcher(client_.get(), &seen,
                                WatcherOptions{.prefix = "/p/",
                                               .initial_backoff = std::chrono::seconds(8),
                                               .max_backoff = std::chrono::seconds(8)});
  ASSERT_TRUE(w.Start().has_value());
  ASSERT_TRUE(WaitFor([&] { return w.status().connected; }));
  etcd_.Stop();
  ASSERT_TRUE(WaitFor([&] { return !w.status().connected; }));
  EXPECT_EQ(seen.deletes, 0);
  std::string error;
  ASSERT_TRUE(etcd_.Start(&error)) << error;
  ASSERT_TRUE(client_->Delete("/p/a").has_value());
  ASSERT_TRUE(client_->Put("/p/c", "new").has_value());
  const std::int64_t rev = client_->Put("/p/b", "2").value();
  ASSERT_TRUE(client_->Compact(rev).has_value());
  EXPECT_TRUE(WaitFor([&] { return seen.Get("/p/c") == "new" && seen.Get("/p/b") == "2"; },
                      std::chrono::seconds(30)));
  EXPECT_EQ(seen.Get("/p/a"), "<none>");
  EXPECT_GE(w.status().relists, 1u);
  EXPECT_TRUE(w.status().connected);
  EXPECT_GE(w.status().failures, 1u);
  w.Stop();
}

}  // namespace
}  // namespace kvroute::etcd
