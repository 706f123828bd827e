#include "sim/kv_transfer_params.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace kvroute::sim {
namespace {

std::optional<boost::json::object> Obj(const char* text) {
  return boost::json::parse(text).as_object();
}

constexpr const char* kDecodeLeg =
    R"({"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[4,5,6],)"
    R"("remote_engine_id":"e","remote_request_id":"cmpl-1","remote_host":"127.0.0.1",)"
    R"("remote_port":5600,"tp_size":4})";

TEST(KvTransferParamsTest, AbsentOrNullMeansNeitherLeg) {
  auto none = ParseKvTransferParams(std::nullopt);
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->prefill_leg);
  EXPECT_FALSE(none->decode);
  auto nulls = ParseKvTransferParams(Obj(R"({"do_remote_decode":null,"do_remote_prefill":null})"));
  ASSERT_TRUE(nulls.has_value());
  EXPECT_FALSE(nulls->prefill_leg);
}

TEST(KvTransferParamsTest, TheToyProxysPrefillLeg) {
  auto p = ParseKvTransferParams(Obj(
      R"({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,)"
      R"("remote_block_ids":null,"remote_host":null,"remote_port":null})"));
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_TRUE(p->prefill_leg);
  EXPECT_FALSE(p->decode);
}

TEST(KvTransferParamsTest, ThePrefillAnswerAsADecodeLeg) {
  auto d = ParseKvTransferParams(Obj(kDecodeLeg));
  ASSERT_TRUE(d.has_value()) << d.error().message;
  ASSERT_TRUE(d->decode);
  EXPECT_EQ(d->decode->remote_block_ids, (std::vector<std::int32_t>{4, 5, 6}));
  EXPECT_EQ(d->decode->remote_engine_id, "e");
  EXPECT_EQ(d->decode->remote_request_id, "cmpl-1");
  EXPECT_EQ(d->decode->remote_port, 5600);
  EXPECT_EQ(d->decode->tp_size, 4u);
}

TEST(KvTransferParamsTest, OneGroupOfBlockIdsIsAccepted) {
  auto d = ParseKvTransferParams(Obj(
      R"({"do_remote_prefill":true,"remote_block_ids":[[1,2]],"remote_engine_id":"e",)"
      R"("remote_request_id":"r","remote_host":"h","remote_port":1})"));
  ASSERT_TRUE(d.has_value()) << d.error().message;
  EXPECT_EQ(d->decode->remote_block_ids, (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(d->decode->tp_size, 1u);
}

TEST(KvTransferParamsTest, MalformedParamsAre400sNamingTheField) {
  const char* cases[] = {
      R"({"do_remote_decode":true,"do_remote_prefill":true})",
      R"({"do_remote_decode":"yes"})",
      R"({"do_remote_prefill":true,"remote_block_ids":[],"remote_engine_id":"e","remote_request_id":"r","remote_host":"h","remote_port":1})",
      R"({"do_remote_prefill":true,"remote_block_ids":["a"],"remote_engine_id":"e","remote_request_id":"r","remote_host":"h","remote_port":1})",
      R"({"do_remote_prefill":true,"remote_block_ids":[-1],"remote_engine_id":"e","remote_request_id":"r","remote_host":"h","remote_port":1})",
      R"({"do_remote_prefill":true,"remote_block_ids":[[1],[2]],"remote_engine_id":"e","remote_request_id":"r","remote_host":"h","remote_port":1})",
      R"({"do_remote_prefill":true,"remote_block_ids":[1],"remote_request_id":"r","remote_host":"h","remote_port":1})",
      R"({"do_remote_prefill":true,"remote_block_ids":[1],"remote_engine_id":"e","remote_host":"h","remote_port":1})",
      R"({"do_remote_prefill":true,"remote_block_ids":[1],"remote_engine_id":"e","remote_request_id":"r","remote_port":1})",
      R"({"do_remote_prefill":true,"remote_block_ids":[1],"remote_engine_id":"e","remote_request_id":"r","remote_host":"h","remote_port":70000})",
      R"({"do_remote_prefill":true,"remote_block_ids":[1],"remote_engine_id":"e","remote_request_id":"r","remote_host":"h","remote_port":"1"})",
      R"({"do_remote_prefill":true,"remote_block_ids":[1],"remote_engine_id":"e","remote_request_id":"r","remote_host":"h","remote_port":1,"tp_size":0})",
  };
  for (const char* c : cases) {
    auto r = ParseKvTransferParams(Obj(c));
    ASSERT_FALSE(r.has_value()) << c;
    EXPECT_EQ(r.error().status, 400) << c;
    EXPECT_EQ(r.error().param, "kv_transfer_params") << c;
  }
}

TEST(KvTransferParamsTest, PrefillAnswerRoundTripsAsADecodeLeg) {
  const boost::json::object o =
      PrefillResponseParams({.engine_id = "eng", .host = "10.0.0.1", .port = 5601, .tp_size = 2},
                            {7, 8}, "cmpl-9");
  // vLLM's key order.
  std::vector<std::string> keys;
  for (const auto& kv : o) keys.emplace_back(kv.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"do_remote_prefill", "do_remote_decode",
                                            "remote_block_ids", "remote_engine_id",
                                            "remote_request_id", "remote_host", "remote_port",
                                            "tp_size"}));
  auto d = ParseKvTransferParams(o);
  ASSERT_TRUE(d.has_value() && d->decode);
  EXPECT_EQ(d->decode->remote_block_ids, (std::vector<std::int32_t>{7, 8}));
  EXPECT_EQ(d->decode->remote_host, "10.0.0.1");
  EXPECT_EQ(d->decode->tp_size, 2u);
}

}  // namespace
}  // namespace kvroute::sim
