#include "api/responses.h"

#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>

namespace kvroute::api {
namespace {

const ResponseMeta kMeta{.id = "cmpl-abc", .created = 1700000000, .model = "m"};

std::vector<std::string> Keys(const boost::json::object& o) {
  std::vector<std::string> keys;
  for (const auto& kv : o) keys.emplace_back(kv.key());
  return keys;
}

TEST(Usage, TotalIsPromptPlusCompletionInVllmOrder) {
  EXPECT_EQ(boost::json::serialize(UsageJson({.prompt_tokens = 5, .completion_tokens = 3}, false)),
            R"({"prompt_tokens":5,"total_tokens":8,"completion_tokens":3})");
}

TEST(Usage, NullDetailsWhenAskedAndNoCachedTokens) {
  EXPECT_TRUE(UsageJson({.prompt_tokens = 1}, true).at("prompt_tokens_details").is_null());
}

TEST(Usage, CachedTokensGoInPromptTokensDetails) {
  const auto j =
      UsageJson({.prompt_tokens = 10, .completion_tokens = 1, .cached_tokens = 8}, false);
  EXPECT_EQ(j.at("prompt_tokens_details").at("cached_tokens").as_int64(), 8);
}

TEST(ResponseId, PrefixAnd32LowercaseHexDigits) {
  const std::string id = MakeResponseId(kChatCompletionIdPrefix, 0x0123456789abcdefULL, 0xffULL);
  EXPECT_EQ(id, "chatcmpl-0123456789abcdef00000000000000ff");
}

TEST(CompletionResponse, FieldByField) {
  const auto j = CompletionResponseJson(kMeta, "Hello", Finish{.reason = "length"},
                                        {.prompt_tokens = 4, .completion_tokens = 2}, nullptr);
  EXPECT_EQ(Keys(j),
            (std::vector<std::string>{"id", "object", "created", "model", "choices", "service_tier",
                                      "system_fingerprint", "usage", "kv_transfer_params"}));
  EXPECT_EQ(j.at("id").as_string(), "cmpl-abc");
  EXPECT_EQ(j.at("object").as_string(), "text_completion");
  EXPECT_EQ(j.at("created").as_int64(), 1700000000);
  EXPECT_EQ(j.at("model").as_string(), "m");
  const auto& choices = j.at("choices").as_array();
  ASSERT_EQ(choices.size(), 1u);
  const auto& c = choices[0].as_object();
  EXPECT_EQ(Keys(c),
            (std::vector<std::string>{"index", "text", "logprobs", "finish_reason", "stop_reason",
                                      "token_ids", "prompt_logprobs", "prompt_token_ids"}));
  EXPECT_EQ(c.at("index").as_int64(), 0);
  EXPECT_EQ(c.at("text").as_string(), "Hello");
  EXPECT_TRUE(c.at("logprobs").is_null());
  EXPECT_EQ(c.at("finish_reason").as_string(), "length");
  EXPECT_TRUE(c.at("stop_reason").is_null());
  const auto& u = j.at("usage").as_object();
  EXPECT_EQ(u.at("prompt_tokens").as_int64(), 4);
  EXPECT_EQ(u.at("completion_tokens").as_int64(), 2);
  EXPECT_EQ(u.at("total_tokens").as_int64(), 6);
  EXPECT_TRUE(u.at("prompt_tokens_details").is_null());
  EXPECT_TRUE(j.at("kv_transfer_params").is_null());
}

TEST(CompletionResponse, StopStringAndKvTransferParams) {
  boost::json::object kv{{"do_remote_prefill", true}, {"remote_engine_id", "e1"}};
  const auto j = CompletionResponseJson(kMeta, "x", Finish{.reason = "stop", .stop_string = "END"},
                                        {.prompt_tokens = 1, .completion_tokens = 1}, &kv);
  EXPECT_EQ(j.at("choices").at(0).at("stop_reason").as_string(), "END");
  EXPECT_EQ(boost::json::serialize(j.at("kv_transfer_params")),
            R"({"do_remote_prefill":true,"remote_engine_id":"e1"})");
}

TEST(ChatCompletionResponse, FieldByField) {
  const ResponseMeta meta{.id = "chatcmpl-1", .created = 5, .model = "llama"};
  const auto j = ChatCompletionResponseJson(
      meta, "Hi there", Finish{}, {.prompt_tokens = 9, .completion_tokens = 2, .cached_tokens = 8},
      nullptr);
  EXPECT_EQ(Keys(j),
            (std::vector<std::string>{"id", "object", "created", "model", "choices", "service_tier",
                                      "system_fingerprint", "usage", "prompt_logprobs",
                                      "prompt_token_ids", "kv_transfer_params"}));
  EXPECT_EQ(j.at("object").as_string(), "chat.completion");
  const auto& c = j.at("choices").at(0).as_object();
  EXPECT_EQ(Keys(c), (std::vector<std::string>{"index", "message", "logprobs", "finish_reason",
                                               "stop_reason", "token_ids"}));
  const auto& m = c.at("message").as_object();
  EXPECT_EQ(m.at("role").as_string(), "assistant");
  EXPECT_EQ(m.at("content").as_string(), "Hi there");
  EXPECT_TRUE(m.at("tool_calls").as_array().empty());
  EXPECT_EQ(c.at("finish_reason").as_string(), "stop");
  EXPECT_EQ(j.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 8);
  EXPECT_EQ(j.at("usage").at("total_tokens").as_int64(), 11);
}

TEST(ModelsList, VllmShape) {
  const auto j = ModelsListJson({ModelCard{.id = "m", .created = 7, .max_model_len = 4096},
                                 ModelCard{.id = "lora1",
                                           .created = 7,
                                           .root = "/adapters/lora1",
                                           .parent = "m",
                                           .max_model_len = 4096}});
  EXPECT_EQ(boost::json::serialize(j),
            R"({"object":"list","data":[)"
            R"({"id":"m","object":"model","created":7,"owned_by":"vllm","root":"m","parent":null,)"
            R"("max_model_len":4096,"permission":[]},)"
            R"({"id":"lora1","object":"model","created":7,"owned_by":"vllm",)"
            R"("root":"/adapters/lora1","parent":"m","max_model_len":4096,"permission":[]}]})");
}

}  // namespace
}  // namespace kvroute::api
