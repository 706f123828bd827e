#include "sim/sim_server.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <string>

#include "kv/keys/vllm_hash.h"
#include "net/test_client.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::sim {
namespace {

using net::testing::TestClient;
namespace json = boost::json;

class SimServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SimConfig c;
    c.host = "127.0.0.1";
    c.port = 0;
    c.kv_events = false;
    c.speedup = 1000;
    c.served_model_name = "test-model";
    c.max_model_len = 512;
    c.num_gpu_blocks = 256;
    auto s = SimServer::Create(c, std::make_shared<tokenize::SimpleTokenizer>());
    ASSERT_TRUE(s.has_value()) << s.error();
    server_ = std::move(*s);
    ASSERT_TRUE(server_->Start().has_value());
    ASSERT_TRUE(client_.Connect(server_->port()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::milliseconds(0));
  }

  net::testing::ParsedResponse Post(const std::string& path, const std::string& body) {
    EXPECT_TRUE(client_.Send(TestClient::Post(path, body)));
    return client_.ReadResponse();
  }
  net::testing::ParsedResponse Get(const std::string& path) {
    EXPECT_TRUE(client_.Send(TestClient::Get(path)));
    return client_.ReadResponse();
  }

  std::unique_ptr<SimServer> server_;
  TestClient client_;
};

TEST_F(SimServerTest, CompletionReturnsTextAndUsage) {
  auto r =
      Post("/v1/completions",
           R"({"model":"test-model","prompt":"hello there","max_tokens":5,"ignore_eos":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = json::parse(r.body).as_object();
  EXPECT_EQ(v.at("object").as_string(), "text_completion");
  EXPECT_EQ(v.at("model").as_string(), "test-model");
  const auto& choice = v.at("choices").as_array().at(0).as_object();
  EXPECT_FALSE(choice.at("text").as_string().empty());
  EXPECT_EQ(choice.at("finish_reason").as_string(), "length");
  EXPECT_EQ(v.at("usage").at("completion_tokens").as_int64(), 5);
}

TEST_F(SimServerTest, DebugKvCacheListsTheFinishedPromptsBlocksUnderVllmHashes) {
  std::string ids;
  std::vector<TokenId> prompt;
  for (TokenId t = 500; t < 548; ++t) {  // 3 full blocks
    prompt.push_back(t);
    ids += (ids.empty() ? "" : ",") + std::to_string(t);
  }
  auto done = Post("/v1/completions", R"({"model":"test-model","prompt":[)" + ids +
                                          R"(],"max_tokens":2,"ignore_eos":true})");
  ASSERT_EQ(done.status, 200) << done.body;
  auto r = Get("/debug/kv_cache");
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = json::parse(r.body).as_object();
  EXPECT_EQ(v.at("block_size").to_number<int>(), 16);
  EXPECT_TRUE(v.at("kv_events").is_null());  // this fixture runs without KV events
  const auto& gpu = v.at("tiers").at("GPU").as_array();
  for (const auto& h : kv::VllmBlockHashes(prompt, 16, kv::VllmNoneHash("0"))) {
    bool found = false;
    for (const auto& x : gpu) found |= x.to_number<std::uint64_t>() == h.Low64();
    EXPECT_TRUE(found) << h.Hex();
  }
}

TEST_F(SimServerTest, SameSeedAndPromptGiveTheSameText) {
  const std::string body =
      R"({"model":"test-model","prompt":"abc def","max_tokens":6,"ignore_eos":true,"seed":7})";
  auto a = json::parse(Post("/v1/completions", body).body);
  auto b = json::parse(Post("/v1/completions", body).body);
  EXPECT_EQ(a.at("choices").at(0).at("text"), b.at("choices").at(0).at("text"));
}

TEST_F(SimServerTest, ChatStreamSendsRoleChunkContentUsageAndDone) {
  auto r = Post("/v1/chat/completions",
                R"({"model":"test-model","messages":[{"role":"user","content":"hi"}],
                    "max_tokens":4,"ignore_eos":true,"stream":true,
                    "stream_options":{"include_usage":true}})");
  ASSERT_EQ(r.status, 200);
  ASSERT_TRUE(r.complete);
  EXPECT_NE(r.head.find("text/event-stream"), std::string::npos);
  EXPECT_NE(r.body.find(R"("role":"assistant")"), std::string::npos);
  EXPECT_NE(r.body.find(R"("finish_reason":"length")"), std::string::npos);
  EXPECT_NE(r.body.find(R"("choices":[],)"), std::string::npos);
  EXPECT_EQ(r.body.substr(r.body.size() - 14), "data: [DONE]\n\n");
}

TEST_F(SimServerTest, RepeatedPromptReportsCachedTokens) {
  std::string prompt(400, 'x');
  for (std::size_t i = 3; i < prompt.size(); i += 4) prompt[i] = ' ';
  const std::string body =
      R"({"model":"test-model","prompt":")" + prompt + R"(","max_tokens":2,"ignore_eos":true})";
  auto first = json::parse(Post("/v1/completions", body).body);
  auto second = json::parse(Post("/v1/completions", body).body);
  EXPECT_EQ(first.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 0);
  EXPECT_GT(second.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 0);
}

TEST_F(SimServerTest, UnknownModelIs404WithAnErrorObject) {
  auto r = Post("/v1/completions", R"({"model":"other","prompt":"hi"})");
  EXPECT_EQ(r.status, 404);
  auto v = json::parse(r.body);
  EXPECT_TRUE(v.at("error").at("message").is_string());
}

TEST_F(SimServerTest, PromptLongerThanTheContextIs400) {
  std::string prompt;
  for (int i = 0; i < 600; ++i) prompt += "ab ";
  auto r = Post("/v1/completions",
                R"({"model":"test-model","prompt":")" + prompt + R"(","max_tokens":4})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("maximum context length"), std::string::npos);
}

TEST_F(SimServerTest, MalformedJsonIs400) {
  EXPECT_EQ(Post("/v1/chat/completions", "{not json").status, 400);
}

TEST_F(SimServerTest, TokenizeAndDetokenizeRoundTrip) {
  auto t = Post("/tokenize", R"({"model":"test-model","prompt":"round trip"})");
  ASSERT_EQ(t.status, 200) << t.body;
  auto tv = json::parse(t.body);
  EXPECT_EQ(tv.at("max_model_len").as_int64(), 512);
  json::array tokens = tv.at("tokens").as_array();
  tokens.erase(tokens.begin());  // the BOS added by add_special_tokens
  auto d = Post("/detokenize", R"({"tokens":)" + json::serialize(tokens) + "}");
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(json::parse(d.body).at("prompt").as_string(), "round trip");
}

TEST_F(SimServerTest, ModelsListsTheServedModel) {
  auto r = Get("/v1/models");
  ASSERT_EQ(r.status, 200);
  auto v = json::parse(r.body);
  EXPECT_EQ(v.at("data").at(0).at("id").as_string(), "test-model");
  EXPECT_EQ(v.at("data").at(0).at("max_model_len").as_int64(), 512);
}

TEST_F(SimServerTest, HealthAndMetricsAnswer) {
  EXPECT_EQ(Get("/health").status, 200);
  Post("/v1/completions", R"({"model":"test-model","prompt":"x y","max_tokens":3})");
  auto m = Get("/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("vllm:num_requests_running{"), std::string::npos);
  EXPECT_NE(m.body.find(
                "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"test-model\"} 1"),
            std::string::npos);
  EXPECT_NE(m.body.find("vllm:cache_config_info{block_size=\"16\""), std::string::npos);
  EXPECT_NE(m.body.find("prefix_caching_hash_algo=\"sha256_cbor\""), std::string::npos);
}

TEST_F(SimServerTest, ResetPrefixCacheDropsCachedTokens) {
  std::string prompt;
  for (int i = 0; i < 100; ++i) prompt += "abc ";
  const std::string body =
      R"({"model":"test-model","prompt":")" + prompt + R"(","max_tokens":2,"ignore_eos":true})";
  Post("/v1/completions", body);
  EXPECT_EQ(Post("/reset_prefix_cache", "").status, 200);
  auto again = json::parse(Post("/v1/completions", body).body);
  EXPECT_EQ(again.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 0);
}

TEST_F(SimServerTest, WithoutACpuTierNoConnectorCountersAreExported) {
  Post("/v1/completions", R"({"model":"test-model","prompt":"x y","max_tokens":3})");
  EXPECT_EQ(Get("/metrics").body.find("vllm:external_prefix_cache"), std::string::npos);
}

// The value of the first sample of `name` (followed by '{' or ' ') in an exposition; -1 if none.
double Sample(const std::string& text, const std::string& name) {
  for (auto at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    if (at > 0 && text[at - 1] != '\n') continue;
    const auto end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    if (line.size() <= name.size() || (line[name.size()] != '{' && line[name.size()] != ' ')) {
      continue;
    }
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

// With async_tier_loads the load is a timed event the engine loop must wake for while
// nothing else runs: the answer still comes, with the same counters.
class SimServerCpuTierTest : public ::testing::TestWithParam<bool> {};

TEST_P(SimServerCpuTierTest, CpuTierHitsAreCountedAsTheConnectorsNotTheGpuCaches) {
  SimConfig c;
  c.async_tier_loads = GetParam();
  c.host = "127.0.0.1";
  c.port = 0;
  c.kv_events = false;
  c.speedup = 1000;
  c.served_model_name = "m";
  c.max_model_len = 1024;
  c.num_gpu_blocks = 12;  // 192 tokens: a second 150-token prompt evicts the first
  c.num_cpu_blocks = 64;
  auto s = SimServer::Create(c, std::make_shared<tokenize::SimpleTokenizer>());
  ASSERT_TRUE(s.has_value()) << s.error();
  auto server = std::move(*s);
  ASSERT_TRUE(server->Start().has_value());
  TestClient client;
  ASSERT_TRUE(client.Connect(server->port()));
  const auto words = [](char letter) {
    std::string p;
    for (int i = 0; i < 75; ++i) p += std::string(1, letter) + std::to_string(10 + i) + " ";
    return p;  // 150 tokens: one per word, one per space
  };
  std::int64_t cached = 0, prompt = 0;
  for (char letter : {'a', 'b', 'a'}) {
    ASSERT_TRUE(client.Send(TestClient::Post(
        "/v1/completions",
        R"({"model":"m","max_tokens":4,"ignore_eos":true,"prompt":")" + words(letter) + "\"}")));
    auto r = client.ReadResponse();
    ASSERT_EQ(r.status, 200) << r.body;
    auto usage = json::parse(r.body).at("usage");
    cached += usage.at("prompt_tokens_details").at("cached_tokens").as_int64();
    prompt += usage.at("prompt_tokens").as_int64();
  }
  ASSERT_TRUE(client.Send(TestClient::Get("/metrics")));
  const std::string m = client.ReadResponse().body;
  const double gpu_hits = Sample(m, "vllm:prefix_cache_hits_total");
  const double cpu_hits = Sample(m, "vllm:external_prefix_cache_hits_total");
  EXPECT_GT(cpu_hits, 0);  // the third prompt came back from host memory
  EXPECT_DOUBLE_EQ(gpu_hits + cpu_hits, static_cast<double>(cached));
  EXPECT_DOUBLE_EQ(Sample(m, "vllm:external_prefix_cache_queries_total"),
                   static_cast<double>(prompt));
  server->Shutdown(std::chrono::milliseconds(0));
}

INSTANTIATE_TEST_SUITE_P(Loads, SimServerCpuTierTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Async" : "InTheStep";
                         });

}  // namespace
}  // namespace kvroute::sim
