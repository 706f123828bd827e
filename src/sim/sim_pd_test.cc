// P/D between two in-process sims on loopback: the toy proxy's two legs by hand, the pinned
// lifecycle seen through /metrics, bad kv_transfer_params, a dead prefill sim.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "net/test_client.h"
#include "sim/sim_server.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::sim {
namespace {

using net::testing::TestClient;
namespace json = boost::json;

// Speedup 1000: vLLM's 480 s timeout would be 0.48 s of real time, so the default here is
// long enough never to fire during a test.
std::unique_ptr<SimServer> StartSim(double abort_timeout_s = 1e6) {
  SimConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.kv_events = false;
  c.speedup = 1000;
  c.served_model_name = "m";
  c.max_model_len = 2048;
  c.num_gpu_blocks = 256;
  c.kv_transfer = KvTransferConfig{};
  c.kv_side_channel_host = "127.0.0.1";
  c.kv_side_channel_port = 0;
  c.nixl_abort_request_timeout_s = abort_timeout_s;
  auto s = SimServer::Create(c, std::make_shared<tokenize::SimpleTokenizer>());
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error());
  if (!s) return nullptr;
  auto ok = (*s)->Start();
  EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error());
  return std::move(*s);
}

net::testing::ParsedResponse Post(const SimServer& s, const std::string& path,
                                  const std::string& body) {
  TestClient client;
  EXPECT_TRUE(client.Connect(s.port()));
  EXPECT_TRUE(client.Send(TestClient::Post(path, body)));
  return client.ReadResponse();
}

// The value of the first sample of `name` in the sim's /metrics, -1 when absent.
double Metric(const SimServer& s, const std::string& name) {
  TestClient client;
  EXPECT_TRUE(client.Connect(s.port()));
  EXPECT_TRUE(client.Send(TestClient::Get("/metrics")));
  const std::string text = client.ReadResponse().body;
  for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    const std::size_t after = at + name.size();
    const bool whole = (at == 0 || text[at - 1] == '\n') && after < text.size() &&
                       (text[after] == '{' || text[after] == ' ');
    if (!whole) continue;
    const std::string line = text.substr(at, text.find('\n', at) - at);
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

// Waits (bounded) until `name` reads `want`; returns the last value read.
double WaitMetric(const SimServer& s, const std::string& name, double want) {
  double v = Metric(s, name);
  for (int i = 0; i < 200 && v != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    v = Metric(s, name);
  }
  return v;
}

std::string Prompt(int n, int start = 100) {
  std::string ids;
  for (int i = 0; i < n; ++i) ids += (i ? "," : "") + std::to_string(start + i);
  return "[" + ids + "]";
}

// The prefill leg exactly as vLLM's toy_proxy_server.py builds it.
std::string PrefillBody(const std::string& prompt) {
  return R"({"model":"m","prompt":)" + prompt +
         R"(,"max_tokens":1,"stream":false,"kv_transfer_params":{"do_remote_decode":true,)"
         R"("do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,)"
         R"("remote_host":null,"remote_port":null}})";
}

std::string DecodeBody(const std::string& prompt, const json::object& kv, int max_tokens = 5) {
  return R"({"model":"m","prompt":)" + prompt + R"(,"max_tokens":)" + std::to_string(max_tokens) +
         R"(,"ignore_eos":true,"kv_transfer_params":)" + json::serialize(kv) + "}";
}

class SimPdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    prefill_ = StartSim();
    decode_ = StartSim();
    ASSERT_TRUE(prefill_ && decode_);
  }
  void TearDown() override {
    if (decode_) decode_->Shutdown(std::chrono::milliseconds(0));
    if (prefill_) prefill_->Shutdown(std::chrono::milliseconds(0));
  }
  json::object RunPrefill(const std::string& prompt) {
    auto r = Post(*prefill_, "/v1/completions", PrefillBody(prompt));
    EXPECT_EQ(r.status, 200) << r.body;
    auto body = json::parse(r.body).as_object();
    EXPECT_EQ(body.at("choices").at(0).at("finish_reason").as_string(), "length");
    EXPECT_EQ(body.at("usage").at("completion_tokens").as_int64(), 1);
    EXPECT_TRUE(body.at("kv_transfer_params").is_object()) << r.body;
    return body.at("kv_transfer_params").as_object();
  }
  std::unique_ptr<SimServer> prefill_;
  std::unique_ptr<SimServer> decode_;
};

TEST_F(SimPdTest, PrefillLegPinsAndNamesItsBlocksAndSideChannel) {
  const json::object kv = RunPrefill(Prompt(40));  // 3 blocks
  EXPECT_TRUE(kv.at("do_remote_prefill").as_bool());
  EXPECT_FALSE(kv.at("do_remote_decode").as_bool());
  EXPECT_EQ(kv.at("remote_block_ids").as_array().size(), 3u);
  EXPECT_EQ(kv.at("remote_engine_id").as_string(), prefill_->kv_engine_id());
  EXPECT_EQ(kv.at("remote_host").as_string(), "127.0.0.1");
  EXPECT_EQ(std::to_string(kv.at("remote_port").as_int64()),
            prefill_->kv_side_channel().substr(prefill_->kv_side_channel().find(':') + 1));
  EXPECT_EQ(kv.at("tp_size").as_int64(), 2);  // the default profile is TP2
  EXPECT_EQ(WaitMetric(*prefill_, "kvroute:nixl_pinned_blocks", 3), 3);
}

TEST_F(SimPdTest, DecodeLegPullsThenThePrefillsPinIsFreed) {
  const std::string prompt = Prompt(40);
  const json::object kv = RunPrefill(prompt);
  auto r = Post(*decode_, "/v1/completions", DecodeBody(prompt, kv));
  ASSERT_EQ(r.status, 200) << r.body;
  auto body = json::parse(r.body).as_object();
  EXPECT_EQ(body.at("usage").at("prompt_tokens").as_int64(), 40);
  EXPECT_EQ(body.at("usage").at("completion_tokens").as_int64(), 5);
  EXPECT_EQ(body.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 39);
  EXPECT_EQ(WaitMetric(*prefill_, "kvroute:nixl_pinned_blocks", 0), 0);
  EXPECT_EQ(Metric(*prefill_, "kvroute:nixl_released_reqs_total"), 1);
  EXPECT_EQ(Metric(*decode_, "kvroute:nixl_transferred_blocks_total"), 3);
  EXPECT_EQ(Metric(*decode_, "vllm:nixl_xfer_time_seconds_count"), 1);
  EXPECT_GT(Metric(*decode_, "vllm:nixl_bytes_transferred_sum"), 0);
}

TEST_F(SimPdTest, ASecondPullOfTheSameBlocksIsRefused) {
  const std::string prompt = Prompt(40);
  const json::object kv = RunPrefill(prompt);
  ASSERT_EQ(Post(*decode_, "/v1/completions", DecodeBody(prompt, kv)).status, 200);
  ASSERT_EQ(WaitMetric(*prefill_, "kvroute:nixl_pinned_blocks", 0), 0);
  auto again = Post(*decode_, "/v1/completions", DecodeBody(prompt, kv));
  EXPECT_EQ(again.status, 400) << again.body;
  EXPECT_NE(again.body.find("no pinned KV"), std::string::npos) << again.body;
}

TEST_F(SimPdTest, InconsistentParamsAre400sAndLeakNoPinnedBlock) {
  const std::string prompt = Prompt(40);
  const json::object kv = RunPrefill(prompt);
  // Block ids of another request, another engine, another prompt, both flags: all refused.
  json::object wrong_blocks = kv;
  wrong_blocks["remote_block_ids"] = json::array{200, 201, 202};
  json::object wrong_engine = kv;
  wrong_engine["remote_engine_id"] = "nobody";
  json::object both = kv;
  both["do_remote_decode"] = true;
  for (const std::string& body :
       {DecodeBody(prompt, wrong_blocks), DecodeBody(prompt, wrong_engine),
        DecodeBody(Prompt(41), kv), DecodeBody(prompt, both)}) {
    auto r = Post(*decode_, "/v1/completions", body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(json::parse(r.body).at("error").at("param").as_string(), "kv_transfer_params")
        << r.body;
  }
  // A streamed prefill leg is refused before anything is pinned.
  std::string streamed = PrefillBody(Prompt(30, 900));
  streamed.replace(streamed.find(R"("stream":false)"), 14, R"("stream":true)");
  EXPECT_EQ(Post(*prefill_, "/v1/completions", streamed).status, 400);
  EXPECT_EQ(Metric(*prefill_, "kvroute:nixl_pinned_blocks"), 3);  // still only the good one
  // The right pull still works and frees it: nothing leaked.
  ASSERT_EQ(Post(*decode_, "/v1/completions", DecodeBody(prompt, kv)).status, 200);
  EXPECT_EQ(WaitMetric(*prefill_, "kvroute:nixl_pinned_blocks", 0), 0);
  EXPECT_EQ(Metric(*decode_, "vllm:nixl_num_failed_transfers_total"), 3);
}

TEST_F(SimPdTest, ADeadPrefillSimFailsTheDecodeLegFast) {
  const std::string prompt = Prompt(40);
  const json::object kv = RunPrefill(prompt);
  prefill_->Shutdown(std::chrono::milliseconds(0));
  const auto start = std::chrono::steady_clock::now();
  auto r = Post(*decode_, "/v1/completions", DecodeBody(prompt, kv));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("unreachable"), std::string::npos) << r.body;
  EXPECT_LT(took, std::chrono::seconds(2));
}

TEST(SimPdTimeoutTest, AnUnreadPinExpiresAtTheTimeout) {
  // 2 simulated seconds at speedup 1000: 2 ms of real time.
  auto prefill = StartSim(/*abort_timeout_s=*/2);
  ASSERT_TRUE(prefill);
  auto r = Post(*prefill, "/v1/completions", PrefillBody(Prompt(40)));
  ASSERT_EQ(r.status, 200) << r.body;
  // Wait on the expiry's own counter: the pinned gauge reads 0 before the pin is published
  // too, and the two are not updated atomically (seen once in 100 runs on a loaded machine).
  EXPECT_EQ(WaitMetric(*prefill, "vllm:nixl_num_kv_expired_reqs_total", 1), 1);
  EXPECT_EQ(WaitMetric(*prefill, "kvroute:nixl_pinned_blocks", 0), 0);
  prefill->Shutdown(std::chrono::milliseconds(0));
}

}  // namespace
}  // namespace kvroute::sim
