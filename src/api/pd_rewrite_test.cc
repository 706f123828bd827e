#include "api/pd_rewrite.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace kvroute::api {
namespace {

boost::json::object Obj(std::string_view json) { return boost::json::parse(json).as_object(); }

TEST(PrefillBody, FollowsTheToyProxyAlgorithm) {
  const auto body = MakePrefillBody(Obj(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,
          "stream_options":{"include_usage":true},"max_tokens":100,
          "max_completion_tokens":100,"min_tokens":5,"min_completion_tokens":5,"seed":3})"));
  EXPECT_EQ(boost::json::serialize(body),
            R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":false,)"
            R"("max_tokens":1,"max_completion_tokens":1,"seed":3,"kv_transfer_params":)"
            R"({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,)"
            R"("remote_block_ids":null,"remote_host":null,"remote_port":null}})");
}

TEST(PrefillBody, ClientKvTransferParamsAreReplacedInPlace) {
  const auto body =
      MakePrefillBody(Obj(R"({"kv_transfer_params":{"a":1},"model":"m","prompt":"x"})"));
  EXPECT_EQ(body.begin()->key(), "kv_transfer_params");
}

TEST(PrefillBody, MaxCompletionTokensIsNotAddedWhenAbsent) {
  const auto body = MakePrefillBody(Obj(R"({"model":"m","prompt":"x"})"));
  EXPECT_FALSE(body.contains("max_completion_tokens"));
  EXPECT_EQ(body.at("max_tokens").as_int64(), 1);
  EXPECT_FALSE(body.at("stream").as_bool());
}

TEST(PrefillBody, ReplacesClientKvTransferParams) {
  const auto body =
      MakePrefillBody(Obj(R"({"model":"m","prompt":"x","kv_transfer_params":{"a":1}})"));
  EXPECT_FALSE(body.at("kv_transfer_params").as_object().contains("a"));
  EXPECT_TRUE(body.at("kv_transfer_params").at("do_remote_decode").as_bool());
}

TEST(DecodeBody, OriginalRequestWithThePrefillParams) {
  const auto client = Obj(R"({"model":"m","prompt":"x","stream":true,"max_tokens":50})");
  const auto kv = Obj(R"({"do_remote_prefill":true,"remote_block_ids":[1,2],"remote_port":5600})");
  EXPECT_EQ(boost::json::serialize(MakeDecodeBody(client, kv)),
            R"({"model":"m","prompt":"x","stream":true,"max_tokens":50,"kv_transfer_params":)"
            R"({"do_remote_prefill":true,"remote_block_ids":[1,2],"remote_port":5600}})");
}

TEST(ExtractKvTransferParams, FromAPrefillResponse) {
  auto kv = ExtractKvTransferParams(
      R"({"id":"cmpl-1","choices":[],"kv_transfer_params":{"remote_engine_id":"e","tp_size":1}})");
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->at("remote_engine_id").as_string(), "e");
}

TEST(ExtractKvTransferParams, NullParamsAreAnError) {
  auto kv = ExtractKvTransferParams(R"({"id":"cmpl-1","kv_transfer_params":null})");
  ASSERT_FALSE(kv);
  EXPECT_EQ(kv.error().status, 500);
}

TEST(ExtractKvTransferParams, GarbageIsAnError) {
  EXPECT_FALSE(ExtractKvTransferParams("<html>bad gateway</html>"));
}

}  // namespace
}  // namespace kvroute::api
