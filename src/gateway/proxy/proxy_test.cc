// The proxy's retry rule (pure), and the proxy on loopback against fake workers
// (net::HttpServer on port 0): relay, retry before the first byte, mid-stream failure as an
// error event, client disconnect cancelling the upstream request. Every proxy test runs three
// times: with the proxy on lanes of its own (chunks hop between the server's and the proxy's
// threads); on ONE lane shared with the front server (as `kvroute serve` shares them: client
// socket, upstream socket and exchange on a single thread, so any blocking wait between them
// would hang the test) with Prepare/Route on the compute pool; and on that one lane with
// Prepare/Route inline (compute_threads = 0, the design before the offload).

#include "gateway/proxy/proxy_test_fixture.h"

#include <cstdlib>
#include <new>

// A counting operator new for this test binary: allocations of at least kLargeAllocBytes
// made by the calling thread while t_count_large_allocs is set. That is how the body hand-off
// test sees a copy of a request body (a copy of a 1 MiB body is one such allocation).
namespace {
constexpr std::size_t kLargeAllocBytes = 1u << 20;
thread_local bool t_count_large_allocs = false;
thread_local int t_large_allocs = 0;
}  // namespace

// GCC pairs the standard new with free() once these are inlined and warns; here both sides
// are replaced, malloc() with free().
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  if (t_count_large_allocs && n >= kLargeAllocBytes) ++t_large_allocs;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// Every other form too, so that no allocation of this binary (libzmq's nothrow new, arrays)
// pairs the sanitizer's operator new with the free() above (ASan: alloc-dealloc-mismatch).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace kvroute::gateway::proxytest {
namespace {

TEST_P(ProxyTest, RelaysANonStreamingAnswerWithTheRequestId) {
  FakeWorker w(FakeWorker::Mode::kJson);
  Start({&w});
  auto r = Post(R"({"model":"m","prompt":"hello"})");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("cmpl-1"), std::string::npos);
  EXPECT_NE(r.head.find("x-kvroute-worker: w0"), std::string::npos);
  EXPECT_EQ(w.requests.load(), 1);
  EXPECT_EQ(w.last_request_id.size(), 32u);
}

TEST_P(ProxyTest, ALargeRequestBodyIsMovedIntoTheExchangeNotCopied) {
  FakeWorker w(FakeWorker::Mode::kJson);
  Start({&w});
  net::HttpRequest request;
  request.method = "POST";
  request.target = request.path = "/v1/completions";
  request.body = R"({"model":"m","prompt":")" + std::string(kLargeAllocBytes, 'a') + R"("})";
  // Handle runs on this thread (as on a lane); its work is posted to other threads, whose
  // allocations (parsing, tokenizing) are not counted.
  t_large_allocs = 0;
  t_count_large_allocs = true;
  net::HandlerResult result = proxy_->Handle(api::Endpoint::kCompletions, std::move(request));
  t_count_large_allocs = false;
  EXPECT_EQ(t_large_allocs, 0) << "the body was copied on its way into the exchange";

  auto* deferred = std::get_if<std::shared_ptr<net::DeferredResponse>>(&result);
  ASSERT_NE(deferred, nullptr);
  auto status = std::make_shared<std::promise<int>>();
  (*deferred)->Wait([status](net::HttpResponse r) { status->set_value(r.status); });
  auto answered = status->get_future();
  ASSERT_EQ(answered.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_GT(answered.get(), 0);
}

TEST_P(ProxyTest, BadRequestNeverReachesAWorker) {
  FakeWorker w(FakeWorker::Mode::kJson);
  Start({&w});
  auto r = Post(R"({"model":"m","prompt":"hello","temperature":-1})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("\"param\":\"temperature\""), std::string::npos);
  EXPECT_EQ(w.requests.load(), 0);
}

TEST_P(ProxyTest, RetriesOnAnotherWorkerWhenTheFirstAnswers503) {
  FakeWorker bad(FakeWorker::Mode::kUnavailable);
  FakeWorker good(FakeWorker::Mode::kJson);
  Start({&bad, &good});
  for (int i = 0; i < 2; ++i) {  // round robin: one of the two starts on the bad worker
    auto r = Post(R"({"model":"m","prompt":"hello"})");
    EXPECT_EQ(r.status, 200);
  }
  // Each request may start on the bad worker; every one ends on the good one.
  EXPECT_GE(bad.requests.load(), 1);
  EXPECT_EQ(good.requests.load(), 2);
}

TEST_P(ProxyTest, RetriesOnAnotherWorkerWhenTheFirstAnswers500) {
  FakeWorker bad(FakeWorker::Mode::kServerError);
  FakeWorker good(FakeWorker::Mode::kJson);
  Start({&bad, &good});
  for (int i = 0; i < 2; ++i) {  // round robin: one of the two starts on the bad worker
    auto r = Post(R"({"model":"m","prompt":"hello"})");
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("cmpl-1"), std::string::npos);
  }
  EXPECT_GE(bad.requests.load(), 1);
  EXPECT_EQ(good.requests.load(), 2);
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

TEST_P(ProxyTest, EveryWorkerAnswering500GivesA502AfterMaxAttempts) {
  FakeWorker a(FakeWorker::Mode::kServerError);
  FakeWorker b(FakeWorker::Mode::kServerError);
  Start({&a, &b});
  auto r = Post(R"({"model":"m","prompt":"hello"})");
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find("server_error"), std::string::npos) << r.body;
  EXPECT_EQ(a.requests.load() + b.requests.load(), 2);
}

TEST_P(ProxyTest, MessagesRequestIsForwardedAsChatAndAnsweredAsAnAnthropicMessage) {
  FakeWorker w(FakeWorker::Mode::kJson);
  Start({&w});
  auto r = Post(R"({"model":"m","max_tokens":4,"system":"be brief",
                    "messages":[{"role":"user","content":"hello"}]})",
                "/v1/messages");
  EXPECT_EQ(r.status, 200);
  const auto sent = boost::json::parse(w.last_body).as_object();
  EXPECT_EQ(sent.at("messages"), boost::json::parse(R"([{"role":"system","content":"be brief"},
                                                        {"role":"user","content":"hello"}])"));
  EXPECT_EQ(sent.at("max_tokens"), 4);
  const auto got = boost::json::parse(r.body).as_object();
  EXPECT_EQ(got.at("type"), "message");
  EXPECT_EQ(got.at("id"), "msg_7");
  EXPECT_EQ(got.at("content"), boost::json::parse(R"([{"type":"text","text":"hi"}])"));
  EXPECT_EQ(got.at("stop_reason"), "end_turn");
}

TEST_P(ProxyTest, MessagesErrorsUseTheAnthropicShape) {
  FakeWorker w(FakeWorker::Mode::kJson);
  Start({&w});
  auto r = Post(R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "/v1/messages");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(boost::json::parse(r.body),
            boost::json::parse(R"({"type":"error","error":{"type":"invalid_request_error",
                                   "message":"'max_tokens' is required."}})"));
  EXPECT_EQ(w.requests.load(), 0);
}

TEST_P(ProxyTest, RetriesWhenAWorkerRefusesConnections) {
  FakeWorker good(FakeWorker::Mode::kJson);
  FakeWorker dead(FakeWorker::Mode::kJson);
  dead.server.Shutdown(milliseconds(0));  // its port now refuses connections
  Start({&dead, &good});
  for (int i = 0; i < 2; ++i) {
    auto r = Post(R"({"model":"m","prompt":"hello"})");
    EXPECT_EQ(r.status, 200);
  }
  EXPECT_EQ(good.requests.load(), 2);
}

TEST_P(ProxyTest, GivesUpWith502WhenEveryWorkerFails) {
  FakeWorker a(FakeWorker::Mode::kUnavailable);
  FakeWorker b(FakeWorker::Mode::kUnavailable);
  Start({&a, &b});
  auto r = Post(R"({"model":"m","prompt":"hello"})");
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find("\"error\""), std::string::npos);
  EXPECT_EQ(a.requests.load() + b.requests.load(), 2);
}

TEST_P(ProxyTest, RelaysAStreamToItsEnd) {
  FakeWorker w(FakeWorker::Mode::kStream);
  Start({&w});
  auto r = Post(R"({"model":"m","prompt":"hello","stream":true})");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.complete);
  EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

TEST_P(ProxyTest, WorkerDyingMidStreamEndsTheStreamWithAnErrorEvent) {
  FakeWorker w(FakeWorker::Mode::kStreamThenDie);
  Start({&w});
  net::testing::TestClient c;
  ASSERT_TRUE(c.Connect(front_->port()));
  c.Send(net::testing::TestClient::Post("/v1/completions",
                                        R"({"model":"m","prompt":"x","stream":true})", false));
  // Let some tokens through, then kill the worker's server: its open stream is cut.
  std::string head = c.ReadSome(200, seconds(5));
  ASSERT_NE(head.find("200"), std::string::npos);
  w.server.Shutdown(milliseconds(0));
  std::string all = head + c.ReadSome(1 << 20, seconds(10));  // to EOF (Connection: close)
  EXPECT_NE(all.find("\"error\""), std::string::npos) << all;
  EXPECT_NE(all.find("data: [DONE]"), std::string::npos);
}

// Killed between its [DONE] and the chunked body's last chunk: the client has the whole
// answer, so it gets no error event and no second [DONE] (seen once in etcd_outage, where a
// worker is killed under load).
TEST_P(ProxyTest, WorkerDyingAfterItsDoneLeavesTheStreamWhole) {
  FakeWorker w(FakeWorker::Mode::kStreamDoneThenDie);
  Start({&w});
  net::testing::TestClient c;
  ASSERT_TRUE(c.Connect(front_->port()));
  c.Send(net::testing::TestClient::Post("/v1/completions",
                                        R"({"model":"m","prompt":"x","stream":true})", false));
  std::string all;
  for (int i = 0; i < 100 && all.find("data: [DONE]") == std::string::npos; ++i) {
    all += c.ReadSome(1 << 16, milliseconds(100));
  }
  ASSERT_NE(all.find("data: [DONE]"), std::string::npos) << all;
  w.server.Shutdown(milliseconds(0));
  all += c.ReadSome(1 << 20, seconds(5));
  EXPECT_EQ(all.find("\"error\""), std::string::npos) << all;
  EXPECT_EQ(all.find("data: [DONE]"), all.rfind("data: [DONE]")) << all;
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

TEST_P(ProxyTest, ClientDisconnectCancelsTheUpstreamStream) {
  FakeWorker w(FakeWorker::Mode::kStreamForever);
  Start({&w});
  {
    net::testing::TestClient c;
    ASSERT_TRUE(c.Connect(front_->port()));
    c.Send(net::testing::TestClient::Post("/v1/completions",
                                          R"({"model":"m","prompt":"x","stream":true})", false));
    ASSERT_NE(c.ReadSome(100, seconds(5)).find("200"), std::string::npos);
    c.Close();
  }
  for (int i = 0; i < 200 && w.cancelled.load() == 0; ++i)
    std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(w.cancelled.load(), 1);
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

TEST_P(ProxyTest, ClientDisconnectCancelsAPendingNonStreamingRequest) {
  FakeWorker w(FakeWorker::Mode::kJsonNever);
  Start({&w});
  {
    net::testing::TestClient c;
    ASSERT_TRUE(c.Connect(front_->port()));
    c.Send(
        net::testing::TestClient::Post("/v1/completions", R"({"model":"m","prompt":"x"})", false));
    for (int i = 0; i < 200 && w.requests.load() == 0; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    ASSERT_EQ(w.requests.load(), 1);
    c.Close();
  }
  for (int i = 0; i < 200 && w.cancelled.load() == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(w.cancelled.load(), 1);
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Lanes, ProxyTest,
                         ::testing::Values(ProxySetup{false, -1, "OwnLanes"},
                                           ProxySetup{true, -1, "SharedWithServer"},
                                           ProxySetup{true, 0, "SharedWithServerInline"}),
                         [](const ::testing::TestParamInfo<ProxySetup>& param) {
                           return std::string(param.param.name);
                         });

}  // namespace
}  // namespace kvroute::gateway::proxytest
