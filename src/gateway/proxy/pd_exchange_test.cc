// The two-leg exchange (proxy/pd_exchange.cc) on loopback against a fake prefill worker and a
// fake decode worker (net::HttpServer on port 0): what each leg is sent, the merged usage and
// headers the client gets, the fallback to local decoding when the prefill leg times out, and
// that both legs' bookings are released.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <mutex>
#include <thread>

#include "fleet/router_state.h"
#include "gateway/proxy/proxy.h"
#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "net/body_queue.h"
#include "net/http_server.h"
#include "net/test_client.h"
#include "sched/registry.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::gateway {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kKvParams =
    R"({"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[1,2],)"
    R"("remote_engine_id":"e1","remote_request_id":"r1","remote_host":"127.0.0.1",)"
    R"("remote_port":5600,"tp_size":1})";

// One fake engine; records what it was sent.
struct FakeEngine {
  explicit FakeEngine(std::function<net::HandlerResult(const net::HttpRequest&)> answer)
      : server(net::ServerOptions{}) {
    auto handler = [this, answer](const net::HttpRequest& r) -> net::HandlerResult {
      {
        std::lock_guard lock(mu);
        bodies.push_back(r.body);
        request_ids.push_back(std::string(r.Header("x-request-id")));
      }
      return answer(r);
    };
    server.Handle("POST", "/v1/completions", handler);
    EXPECT_TRUE(server.Start().has_value());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server.port()); }
  boost::json::object Body(std::size_t i) {
    std::lock_guard lock(mu);
    return boost::json::parse(bodies.at(i)).as_object();
  }
  std::string RequestId(std::size_t i) {
    std::lock_guard lock(mu);
    return request_ids.at(i);
  }
  std::size_t Count() {
    std::lock_guard lock(mu);
    return bodies.size();
  }

  net::HttpServer server;
  std::mutex mu;
  std::vector<std::string> bodies;       // guarded by mu
  std::vector<std::string> request_ids;  // guarded by mu
};

net::HandlerResult PrefillAnswer(const net::HttpRequest&) {
  return net::JsonResponse(
      200, std::string(R"({"id":"cmpl-p","choices":[{"text":"x","finish_reason":"length"}],)") +
               R"("usage":{"prompt_tokens":40,"completion_tokens":1,)" +
               R"("prompt_tokens_details":{"cached_tokens":32}},"kv_transfer_params":)" +
               kKvParams + "}");
}

// The decode engine: D's own usage says 39 cached (local + pulled), as vLLM's would.
net::HandlerResult DecodeAnswer(const net::HttpRequest& r) {
  const bool stream = r.body.find("\"stream\":true") != std::string::npos;
  constexpr const char* kUsage =
      R"("usage":{"prompt_tokens":40,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":39}})";
  if (!stream) {
    return net::JsonResponse(
        200, std::string(R"({"id":"cmpl-d","choices":[{"text":"ab"}],)") + kUsage + "}");
  }
  auto queue = std::make_shared<net::ChunkQueue>([] {});
  net::HttpResponse res;
  res.content_type = "text/event-stream";
  res.stream = queue;
  std::thread([queue, usage = std::string(kUsage)] {
    queue->Push("data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n");
    queue->Push("data: {\"choices\":[{\"text\":\"b\"}],\"usage\":null}\n\n");
    queue->Push("data: {\"choices\":[]," + usage + "}\n\ndata: [DONE]\n\n");
    queue->Close();
  }).detach();
  return res;
}

class PdExchangeTest : public ::testing::Test {
 protected:
  void Start(FakeEngine& prefill, FakeEngine& decode, milliseconds prefill_timeout) {
    for (auto [name, url, role] :
         {std::tuple{"p", prefill.url(), sched::Role::kPrefill},
          std::tuple{"d", decode.url(), sched::Role::kDecode}}) {
      fleet::WorkerSpec spec;
      spec.name = name;
      spec.base_url = url;
      spec.models = {"m"};
      spec.role = role;
      ASSERT_TRUE(router_state_.Add(spec, clock_.Now()).has_value());
    }
    PipelineDeps deps;
    deps.router_state = &router_state_;
    deps.index = &index_;
    deps.predicted = &predicted_;
    deps.tokenizer = std::make_shared<tokenize::SimpleTokenizer>();
    deps.policy = *sched::BuiltinPolicy("predicted_latency");
    PipelineOptions popts;
    popts.pd.rule = sched::PdRule::kTokenCap;  // split whenever D would prefill anything
    popts.pd.token_cap = 0;
    pipeline_ = std::make_unique<RequestPipeline>(std::move(deps), popts);
    ProxyOptions opts;
    opts.lanes = 1;
    opts.timeouts.connect = milliseconds(500);
    opts.timeouts.first_byte = seconds(5);
    opts.pd_prefill_timeout = prefill_timeout;
    proxy_ =
        std::make_unique<Proxy>(opts, pipeline_.get(), &router_state_, &metrics_, nullptr, &clock_);
    front_ = std::make_unique<net::HttpServer>(net::ServerOptions{});
    front_->Handle("POST", "/v1/completions", [this](net::HttpRequest&& r) {
      return proxy_->Handle(api::Endpoint::kCompletions, std::move(r));
    });
    ASSERT_TRUE(front_->Start().has_value());
  }

  void TearDown() override {
    if (front_) front_->Shutdown(milliseconds(0));
    if (proxy_) proxy_->Stop();
  }

  net::testing::ParsedResponse Post(bool stream) {
    boost::json::object body{{"model", "m"},
                             {"prompt", "one two three four five six seven eight nine ten"},
                             {"max_tokens", 2},
                             {"stream", stream}};
    if (stream) body["stream_options"] = boost::json::object{{"include_usage", true}};
    net::testing::TestClient c;
    EXPECT_TRUE(c.Connect(front_->port()));
    c.Send(net::testing::TestClient::Post("/v1/completions", boost::json::serialize(body), false));
    return c.ReadResponse(seconds(10));
  }

  static std::string Lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
    return s;
  }

  // Both legs' bookings released (bounded wait: the end is booked after the last byte).
  std::uint64_t InflightAfterItDrains() {
    for (int i = 0; i < 200 && router_state_.load().inflight() != 0; ++i) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    return router_state_.load().inflight();
  }

  SteadyClock clock_;
  fleet::RouterState router_state_;
  kv::KvIndex index_{kv::BlockKeyer(16)};
  kv::PredictedBlocks predicted_{kv::PredictedOptions{.ttl = seconds(5)}};
  RouterMetrics metrics_;
  std::unique_ptr<RequestPipeline> pipeline_;
  std::unique_ptr<Proxy> proxy_;
  std::unique_ptr<net::HttpServer> front_;
};

TEST_F(PdExchangeTest, SplitRequestPrefillsOnPDecodesOnDWithPsUsage) {
  FakeEngine prefill(PrefillAnswer);
  FakeEngine decode(DecodeAnswer);
  Start(prefill, decode, seconds(5));
  auto r = Post(/*stream=*/false);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(prefill.Count(), 1u);
  ASSERT_EQ(decode.Count(), 1u);
  // The prefill leg: vLLM's proxy rewrite. The decode leg: the client's body + P's params.
  boost::json::object p = prefill.Body(0);
  EXPECT_EQ(p.at("max_tokens").as_int64(), 1);
  EXPECT_FALSE(p.at("stream").as_bool());
  EXPECT_TRUE(p.at("kv_transfer_params").at("do_remote_decode").as_bool());
  boost::json::object d = decode.Body(0);
  EXPECT_EQ(d.at("max_tokens").as_int64(), 2);
  EXPECT_EQ(d.at("kv_transfer_params"), boost::json::parse(kKvParams));
  EXPECT_EQ(prefill.RequestId(0), decode.RequestId(0));
  EXPECT_FALSE(prefill.RequestId(0).empty());
  const std::string head = Lower(r.head);
  EXPECT_NE(head.find("x-kvroute-worker: d"), std::string::npos) << r.head;
  EXPECT_NE(head.find("x-kvroute-prefill-worker: p"), std::string::npos) << r.head;
  EXPECT_NE(head.find("x-request-id: " + Lower(prefill.RequestId(0))), std::string::npos);
  auto answer = boost::json::parse(r.body);
  EXPECT_EQ(answer.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 32);
  EXPECT_EQ(answer.at("usage").at("completion_tokens").as_int64(), 2);
  EXPECT_EQ(InflightAfterItDrains(), 0u);
  EXPECT_NE(metrics_.Expose().find("kvroute_pd_requests_total{placement=\"split\"} 1"),
            std::string::npos);
}

TEST_F(PdExchangeTest, StreamedSplitRequestsFinalUsageChunkCarriesPsCachedTokens) {
  FakeEngine prefill(PrefillAnswer);
  FakeEngine decode(DecodeAnswer);
  Start(prefill, decode, seconds(5));
  auto r = Post(/*stream=*/true);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"cached_tokens\":32"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("\"cached_tokens\":39"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n"),
            std::string::npos);
  EXPECT_NE(r.body.rfind("data: [DONE]\n\n"), std::string::npos);
  EXPECT_TRUE(decode.Body(0).at("stream").as_bool());
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

TEST_F(PdExchangeTest, PrefillLegPastItsTimeoutDecodesLocallyOnD) {
  std::atomic<bool> release{false};
  FakeEngine prefill([&release](const net::HttpRequest& req) {
    // Slower than the prefill timeout (bounded: 3 s, so the server can stop).
    for (int i = 0; i < 300 && !release; ++i) std::this_thread::sleep_for(milliseconds(10));
    return PrefillAnswer(req);
  });
  FakeEngine decode(DecodeAnswer);
  Start(prefill, decode, milliseconds(200));
  auto r = Post(/*stream=*/false);
  release = true;
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(decode.Count(), 1u);
  // D got the client's body: no kv_transfer_params, its own max_tokens.
  boost::json::object d = decode.Body(0);
  EXPECT_FALSE(d.contains("kv_transfer_params"));
  EXPECT_EQ(d.at("max_tokens").as_int64(), 2);
  EXPECT_EQ(Lower(r.head).find("x-kvroute-prefill-worker"), std::string::npos) << r.head;
  // D's own usage, unmerged.
  EXPECT_EQ(boost::json::parse(r.body).at("usage").at("prompt_tokens_details").at("cached_tokens"),
            39);
  EXPECT_EQ(InflightAfterItDrains(), 0u);
  const std::string exposed = metrics_.Expose();
  EXPECT_NE(exposed.find("kvroute_pd_prefill_fallbacks_total{reason=\"total_timeout\"} 1"),
            std::string::npos)
      << exposed;
  EXPECT_NE(exposed.find("kvroute_pd_requests_total{placement=\"local_fallback\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace kvroute::gateway
