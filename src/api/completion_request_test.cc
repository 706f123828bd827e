#include "api/completion_request.h"

#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>

namespace kvroute::api {
namespace {

CompletionRequest ParseOk(std::string_view body) {
  auto r = ParseCompletionRequest(body);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? std::move(*r) : CompletionRequest{};
}

ApiError ParseErr(std::string_view body) {
  auto r = ParseCompletionRequest(body);
  EXPECT_FALSE(r.has_value());
  return r ? ApiError{} : r.error();
}

TEST(CompletionRequest, TextPrompt) {
  const CompletionRequest r = ParseOk(R"({"model":"m","prompt":"Hello"})");
  EXPECT_EQ(r.params.model, "m");
  ASSERT_TRUE(std::holds_alternative<std::string>(r.prompt));
  EXPECT_EQ(std::get<std::string>(r.prompt), "Hello");
}

TEST(CompletionRequest, SingleStringInArray) {
  const CompletionRequest r = ParseOk(R"({"model":"m","prompt":["Hello"]})");
  EXPECT_EQ(std::get<std::string>(r.prompt), "Hello");
}

TEST(CompletionRequest, TokenIdPrompt) {
  const CompletionRequest r = ParseOk(R"({"model":"m","prompt":[1,2,4294967295]})");
  ASSERT_TRUE(std::holds_alternative<std::vector<TokenId>>(r.prompt));
  EXPECT_EQ(std::get<std::vector<TokenId>>(r.prompt), (std::vector<TokenId>{1, 2, 4294967295u}));
}

TEST(CompletionRequest, SingleTokenListInArray) {
  const CompletionRequest r = ParseOk(R"({"model":"m","prompt":[[7,8]]})");
  EXPECT_EQ(std::get<std::vector<TokenId>>(r.prompt), (std::vector<TokenId>{7, 8}));
}

TEST(CompletionRequest, BatchIsRefusedWithAClearMessage) {
  const ApiError e = ParseErr(R"({"model":"m","prompt":["a","b","c"]})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("Batched prompts are not supported"), std::string::npos);
  EXPECT_NE(e.message.find("3 prompts"), std::string::npos);
}

TEST(CompletionRequest, KeepsTheOriginalBodyForForwarding) {
  const CompletionRequest r =
      ParseOk(R"({"model":"m","prompt":"x","unknown_field":[1,{"a":null}],"max_tokens":3})");
  EXPECT_EQ(boost::json::serialize(r.body),
            R"({"model":"m","prompt":"x","unknown_field":[1,{"a":null}],"max_tokens":3})");
}

TEST(CompletionRequest, MaxTokensIsUnsetWhenAbsent) {
  // The vLLM default (16) is applied by the server, so a proxy can tell "absent" apart.
  EXPECT_FALSE(ParseOk(R"({"model":"m","prompt":"x"})").params.max_tokens);
  EXPECT_EQ(kDefaultCompletionMaxTokens, 16);
}

TEST(CompletionRequest, EchoIsRead) {
  EXPECT_TRUE(ParseOk(R"({"model":"m","prompt":"x","echo":true})").echo);
}

TEST(CompletionRequest, KvTransferParamsAreKeptVerbatim) {
  const CompletionRequest r = ParseOk(
      R"({"model":"m","prompt":"x","kv_transfer_params":{"do_remote_prefill":true,
          "remote_block_ids":[1,2],"remote_host":"h","remote_port":5}})");
  ASSERT_TRUE(r.params.kv_transfer_params);
  EXPECT_EQ(
      boost::json::serialize(*r.params.kv_transfer_params),
      R"({"do_remote_prefill":true,"remote_block_ids":[1,2],"remote_host":"h","remote_port":5})");
}

TEST(CompletionRequest, ModelIsCheckedBeforePrompt) {
  EXPECT_EQ(ParseErr(R"({"prompt":5})").param, "model");
}

TEST(CompletionRequest, InvalidUtf8IsAMalformedBody) {
  const std::string body = "{\"model\":\"m\",\"prompt\":\"\xff\xfe\"}";
  const ApiError e = ParseErr(body);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "");
}

TEST(CompletionRequest, DuplicateKeysKeepTheLastValueLikePython) {
  // Python's json (vLLM) keeps the last duplicate; so must we, or the router would route on a
  // different model than the engine serves.
  const CompletionRequest r = ParseOk(R"({"model":"a","prompt":"x","model":"b"})");
  EXPECT_EQ(r.params.model, "b");
}

TEST(CompletionRequest, ParsesFromAnAlreadyParsedObject) {
  boost::json::object obj{{"model", "m"}, {"prompt", "p"}};
  auto r = ParseCompletionRequest(std::move(obj));
  ASSERT_TRUE(r);
  EXPECT_EQ(std::get<std::string>(r->prompt), "p");
}

}  // namespace
}  // namespace kvroute::api
