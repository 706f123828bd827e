// RunOverheadLoad against in-process fake OpenAI servers (net::HttpServer on port 0): a
// streamed answer is a role chunk, `max_tokens` content chunks and [DONE]; a buffered answer
// is one JSON body; a server can be switched to answer 500.
#include "bench/overhead_load.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>

#include "bench/cluster_process.h"
#include "net/body_queue.h"
#include "net/http_server.h"

namespace kvroute::bench {
namespace {
namespace json = boost::json;

class FakeOpenAi {
 public:
  FakeOpenAi() : server_(net::ServerOptions{}) {
    server_.Handle("POST", "/v1/chat/completions",
                   [this](const net::HttpRequest& r) { return Complete(r); });
    EXPECT_TRUE(server_.Start().has_value());
  }
  ~FakeOpenAi() { server_.Shutdown(std::chrono::milliseconds(0)); }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  int requests() const { return requests_; }
  std::atomic<bool> fail_with_500{false};
  std::atomic<bool> error_event{false};  // stream an error object after the first token

 private:
  net::HttpResponse Complete(const net::HttpRequest& r) {
    ++requests_;
    if (fail_with_500) return net::JsonResponse(500, R"({"error":{"message":"boom"}})");
    const json::object body = json::parse(r.body).as_object();
    const int max_tokens = static_cast<int>(body.at("max_tokens").to_number<int>());
    if (!body.at("stream").as_bool()) {
      return net::JsonResponse(
          200, R"({"choices":[{"index":0,"message":{"role":"assistant","content":"w"}}]})");
    }
    auto q = std::make_shared<net::ChunkQueue>();
    q->Push(R"(data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})"
            "\n\n");
    for (int i = 0; i < max_tokens; ++i) {
      q->Push(R"(data: {"choices":[{"index":0,"delta":{"content":"w "}}]})"
              "\n\n");
      if (i == 0 && error_event) q->Push("data: {\"error\":{\"message\":\"engine died\"}}\n\n");
    }
    q->Push("data: [DONE]\n\n");
    q->Close();
    net::HttpResponse res;
    res.content_type = "text/event-stream";
    res.stream = q;
    return res;
  }

  net::HttpServer server_;
  std::atomic<int> requests_{0};
};

OverheadLoadOptions Options(std::vector<std::string> urls, bool stream = true) {
  OverheadLoadOptions o;
  o.urls = std::move(urls);
  o.bodies = {OverheadChatBody("m", "hello there", 5, stream)};
  o.stream = stream;
  o.concurrency = 2;
  o.warmup_requests = 3;
  o.requests = 10;
  o.duration_s = 30;
  o.request_timeout_s = 10;
  return o;
}

TEST(OverheadChatBody, AsksForExactlyMaxTokensAndTheStreamMode) {
  const auto body = json::parse(OverheadChatBody("qwen", "hi", 7, false)).as_object();
  EXPECT_EQ(body.at("model").as_string(), "qwen");
  EXPECT_EQ(body.at("max_tokens").as_int64(), 7);
  EXPECT_TRUE(body.at("ignore_eos").as_bool());
  EXPECT_FALSE(body.at("stream").as_bool());
  EXPECT_EQ(body.at("messages").as_array()[0].as_object().at("content").as_string(), "hi");
}

TEST(RunOverheadLoad, RecordsOnlyRequestsAfterTheWarmUp) {
  FakeOpenAi fake;
  auto r = RunOverheadLoad(Options({fake.url()}));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->samples.size(), 10u);
  EXPECT_EQ(fake.requests(), 13);
  EXPECT_GT(r->elapsed_s, 0);
}

TEST(RunOverheadLoad, StreamedRequestsCountEveryDataEventButDone) {
  FakeOpenAi fake;
  auto r = RunOverheadLoad(Options({fake.url()}));
  ASSERT_TRUE(r) << r.error();
  for (const auto& s : r->samples) {
    EXPECT_EQ(s.error_kind, "");
    EXPECT_EQ(s.chunks, 6u);  // role chunk + 5 tokens
    EXPECT_GT(s.latency_s, 0);
    EXPECT_LE(s.latency_s, s.e2e_s);
  }
}

TEST(RunOverheadLoad, RequestsAreSpreadOverEveryUrlInTurn) {
  FakeOpenAi a, b;
  auto o = Options({a.url(), b.url()});
  o.warmup_requests = 0;
  auto r = RunOverheadLoad(o);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(a.requests(), 5);
  EXPECT_EQ(b.requests(), 5);
}

TEST(RunOverheadLoad, NonStreamedRequestsAreOkWithoutChunks) {
  FakeOpenAi fake;
  auto r = RunOverheadLoad(Options({fake.url()}, /*stream=*/false));
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->samples.size(), 10u);
  for (const auto& s : r->samples) {
    EXPECT_EQ(s.error_kind, "");
    EXPECT_EQ(s.chunks, 0u);
    EXPECT_GT(s.latency_s, 0);
    EXPECT_LE(s.latency_s, s.e2e_s);
  }
}

TEST(RunOverheadLoad, ServerErrorsAreSamplesWithTheirKind) {
  FakeOpenAi fake;
  fake.fail_with_500 = true;
  auto r = RunOverheadLoad(Options({fake.url()}));
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->samples.size(), 10u);
  for (const auto& s : r->samples) EXPECT_EQ(s.error_kind, "http_5xx");
}

TEST(RunOverheadLoad, AnErrorEventInTheStreamFailsTheRequest) {
  FakeOpenAi fake;
  fake.error_event = true;
  auto r = RunOverheadLoad(Options({fake.url()}));
  ASSERT_TRUE(r) << r.error();
  for (const auto& s : r->samples) EXPECT_EQ(s.error_kind, "stream");
}

TEST(RunOverheadLoad, UnreachableTargetIsAConnectError) {
  auto port = FreeLoopbackPort();  // free a moment ago: nothing listens there
  ASSERT_TRUE(port);
  auto o = Options({"http://127.0.0.1:" + std::to_string(*port)});
  o.warmup_requests = 0;
  o.requests = 2;
  auto r = RunOverheadLoad(o);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->samples.size(), 2u);
  EXPECT_EQ(r->samples[0].error_kind, "connect_refused");
}

TEST(RunOverheadLoad, TheDurationCapStopsALevelBeforeItsCount) {
  FakeOpenAi fake;
  auto o = Options({fake.url()});
  o.requests = 1'000'000;
  o.duration_s = 0.2;
  auto r = RunOverheadLoad(o);
  ASSERT_TRUE(r) << r.error();
  EXPECT_LT(r->samples.size(), 1'000'000u);
}

TEST(RunOverheadLoad, MissingUrlOrBodyIsASetupError) {
  auto o = Options({});
  EXPECT_FALSE(RunOverheadLoad(o));
  o = Options({"http://127.0.0.1:1"});
  o.bodies.clear();
  EXPECT_FALSE(RunOverheadLoad(o));
  o = Options({"ftp://x"});
  EXPECT_FALSE(RunOverheadLoad(o));
}

}  // namespace
}  // namespace kvroute::bench
