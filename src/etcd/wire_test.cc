#include "etcd/wire.h"

#include <gtest/gtest.h>

#include "etcd/worker_record.h"

namespace kvroute::etcd {
namespace {

TEST(EtcdWireTest, Base64MatchesRfc4648Vectors) {
  const std::pair<const char*, const char*> vectors[] = {
      {"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},        {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
  for (auto [plain, encoded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), encoded);
    EXPECT_EQ(Base64Decode(encoded).value(), plain);
  }
  const std::string binary("\x00\xff\x10\x80", 4);
  EXPECT_EQ(Base64Decode(Base64Encode(binary)).value(), binary);
  EXPECT_FALSE(Base64Decode("Zm9v!").has_value());
  EXPECT_FALSE(Base64Decode("Z").has_value());
}

TEST(EtcdWireTest, PrefixEndIncrementsTheLastByteBelow0xff) {
  EXPECT_EQ(PrefixEnd("/k/"), "/k0");
  EXPECT_EQ(PrefixEnd("a\xff"), "b");
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
  EXPECT_EQ(PrefixEnd("\xff\xff"), std::string(1, '\0'));
}

// Bodies as etcd 3.4.23's gateway wrote them (captured with curl).
TEST(EtcdWireTest, ParsesRangeWithInt64sAsStrings) {
  auto r = ParseRange(
      R"({"header":{"cluster_id":"7801232528081817440","revision":"2","raft_term":"2"},)"
      R"("kvs":[{"key":"L2svYQ==","create_revision":"2","mod_revision":"2","version":"1",)"
      R"("value":"eA==","lease":"5007618183338387717"}],"count":"1"})");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->revision, 2);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, "/k/a");
  EXPECT_EQ(r->kvs[0].value, "x");
  EXPECT_EQ(r->kvs[0].lease, 5007618183338387717);
  auto empty = ParseRange(R"({"header":{"revision":"9"}})");
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->kvs.empty());
}

TEST(EtcdWireTest, WatchPutEventsHaveNoType) {
  auto m = ParseWatchMessage(
      R"({"result":{"header":{"revision":"2"},"events":[{"kv":{"key":"L2svYQ==",)"
      R"("create_revision":"2","mod_revision":"2","version":"1","value":"eA=="}}]}})");
  ASSERT_TRUE(m.has_value()) << m.error();
  ASSERT_EQ(m->events.size(), 1u);
  EXPECT_EQ(m->events[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(m->events[0].kv.mod_revision, 2);
  auto del = ParseWatchMessage(
      R"({"result":{"header":{"revision":"3"},"events":[{"type":"DELETE","kv":{"key":"L2svYQ==","mod_revision":"3"}}]}})");
  ASSERT_TRUE(del.has_value());
  EXPECT_EQ(del->events[0].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(del->events[0].kv.key, "/k/a");
}

TEST(EtcdWireTest, WatchCreatedAndCompactedMessages) {
  auto created = ParseWatchMessage(R"({"result":{"header":{"revision":"2"},"created":true}})");
  ASSERT_TRUE(created.has_value());
  EXPECT_TRUE(created->created);
  auto compacted = ParseWatchMessage(
      R"({"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"3"}})");
  ASSERT_TRUE(compacted.has_value());
  EXPECT_TRUE(compacted->canceled);
  EXPECT_EQ(compacted->compact_revision, 3);
  EXPECT_FALSE(ParseWatchMessage(R"({"result":{"events":[{"type":"NOPE","kv":{}}]}})"));
  EXPECT_FALSE(ParseWatchMessage("not json"));
}

TEST(EtcdWireTest, KeepAliveOfALostLeaseHasNoTtl) {
  EXPECT_EQ(ParseKeepAlive(R"({"result":{"header":{"revision":"2"},"ID":"123"}})").value(), 0);
  EXPECT_EQ(ParseKeepAlive(R"({"result":{"header":{},"ID":"123","TTL":"7"}})").value(), 7);
  EXPECT_EQ(ErrorText(R"({"error":"x","message":"etcdserver: requested lease not found","code":5})"),
            "etcdserver: requested lease not found (code 5)");
}

TEST(EtcdWireTest, RequestBodiesAreBase64) {
  EXPECT_EQ(PutBody("/k/a", "x", 5), R"({"key":"L2svYQ==","value":"eA==","lease":"5"})");
  EXPECT_EQ(RangePrefixBody("/k/"), R"({"key":"L2sv","range_end":"L2sw"})");
  EXPECT_EQ(WatchPrefixBody("/k/", 4),
            R"({"create_request":{"key":"L2sv","range_end":"L2sw","start_revision":"4"}})");
}

TEST(WorkerRecordTest, RoundTripsEveryField) {
  WorkerRecord r{.name = "w1", .url = "http://127.0.0.1:8001", .models = {"m", "lora"},
                 .role = "decode", .tp = 4, .gpus = 4, .block_size = 16,
                 .kv_events_endpoint = "tcp://127.0.0.1:5557",
                 .kv_events_replay_endpoint = "tcp://127.0.0.1:5558", .kv_events_topic = "kv",
                 .profile = "llama3-8b-h100", .profile_speedup = 10, .draining = true,
                 .link = "ib-400g", .link_bytes_per_s = 4.5e10, .link_latency_s = 0.002};
  auto back = ParseWorkerRecord(ToJson(r));
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(*back, r);
}

// The P/D fields a launcher writes for a real vLLM (docs/etcd.md), as JSON text.
TEST(WorkerRecordTest, ReadsTheLinkFieldsOfADecodeServer) {
  auto r = ParseWorkerRecord(
      R"({"name":"d0","url":"http://10.0.0.2:8000","models":["m"],"role":"decode","tp":4,)"
      R"("gpus":8,"link":"roce-100g","link_bytes_per_s":12500000000,"link_latency_s":0})");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->role, "decode");
  EXPECT_EQ(r->tp, 4u);
  EXPECT_EQ(r->gpus, 8u);
  EXPECT_EQ(r->link, "roce-100g");
  EXPECT_EQ(r->link_bytes_per_s, 12.5e9);
  EXPECT_EQ(r->link_latency_s, 0.0);
  const std::string base = R"({"name":"w","url":"http://h:1","models":["m"],)";
  EXPECT_EQ(ParseWorkerRecord(base + R"("link_bytes_per_s":0})").error(),
            "link_bytes_per_s: must be a number > 0");
  EXPECT_EQ(ParseWorkerRecord(base + R"("link_latency_s":-1})").error(),
            "link_latency_s: must be a number >= 0");
  EXPECT_EQ(ParseWorkerRecord(base + R"("link_bytes_per_s":"fast"})").error(),
            "link_bytes_per_s: must be a number > 0");
  EXPECT_EQ(ParseWorkerRecord(base + R"("link":7})").error(), "link: must be a string");
  EXPECT_EQ(ParseWorkerRecord(base + R"("tp":4,"gpus":2})").error(), "gpus: must be >= tp");
}

TEST(WorkerRecordTest, MinimalRecordTakesDefaults) {
  auto r = ParseWorkerRecord(R"({"name":"w","url":"http://h:1","models":["m"],"extra":1})");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->role, "mixed");
  EXPECT_EQ(r->tp, 0u);  // not said: the profile's
  EXPECT_EQ(r->gpus, 0u);
  EXPECT_TRUE(r->link.empty());
  EXPECT_FALSE(r->link_bytes_per_s.has_value());
  EXPECT_FALSE(r->draining);
  EXPECT_EQ(r->profile_speedup, 1);
}

TEST(WorkerRecordTest, MalformedRecordsNameTheField) {
  EXPECT_EQ(ParseWorkerRecord("{").error().substr(0, 8), "not JSON");
  EXPECT_EQ(ParseWorkerRecord(R"({"url":"http://h:1","models":["m"]})").error(), "name: required");
  EXPECT_EQ(ParseWorkerRecord(R"({"name":"w","url":"http://h:1","models":[]})").error(),
            "models: must be a non-empty array of strings");
  EXPECT_EQ(ParseWorkerRecord(R"({"name":"w","url":"http://h:1","models":["m"],"tp":0})").error(),
            "tp: must be an integer >= 1");
  EXPECT_EQ(
      ParseWorkerRecord(R"({"name":"w","url":"http://h:1","models":["m"],"draining":"yes"})")
          .error(),
      "draining: must be true or false");
  EXPECT_EQ(
      ParseWorkerRecord(R"({"name":"w","url":"http://h:1","models":["m"],"role":"boss"})").error(),
      "role: must be mixed, prefill or decode");
}

}  // namespace
}  // namespace kvroute::etcd
