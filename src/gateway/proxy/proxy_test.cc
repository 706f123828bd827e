// The proxy's retry rule (pure), and the proxy on loopback against fake workers
// (net::HttpServer on port 0): relay, retry before the first byte, mid-stream failure as an
// error event, client disconnect cancelling the upstream request. Every proxy test runs three
// times: with the proxy on lanes of its own (chunks hop between the server's and the proxy's
// threads); on ONE lane shared with the front server (as `kvroute serve` shares them: client
// socket, upstream socket and exchange on a single thread, so any blocking wait between them
// would hang the test) with Prepare/Route on the compute pool; and on that one lane with
// Prepare/Route inline (compute_threads = 0, the design before the offload).
#include "gateway/proxy/proxy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <ostream>
#include <thread>

#include "gateway/request_pipeline.h"
#include "gateway/router_metrics.h"
#include "fleet/router_state.h"
#include "net/body_queue.h"
#include "net/http_server.h"
#include "net/lane_pool.h"
#include "net/test_client.h"
#include "sched/registry.h"
#include "tokenize/simple_tokenizer.h"

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

namespace kvroute::gateway {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(DecideRetry, RetriesWhileNothingWasSentAndAttemptsRemain) {
  EXPECT_EQ(DecideRetry(AttemptFailure::kConnect, false, 1, 3), RetryDecision::kRetry);
  EXPECT_EQ(DecideRetry(AttemptFailure::kUnavailable, false, 2, 3), RetryDecision::kRetry);
  EXPECT_EQ(DecideRetry(AttemptFailure::kFirstByteTimeout, false, 1, 2), RetryDecision::kRetry);
}

TEST(DecideRetry, NeverRetriesOnceTheClientSawBytes) {
  for (auto f : {AttemptFailure::kConnect, AttemptFailure::kClosed, AttemptFailure::kIdleTimeout,
                 AttemptFailure::kUnavailable, AttemptFailure::kProtocol}) {
    EXPECT_EQ(DecideRetry(f, true, 1, 3), RetryDecision::kGiveUp) << AttemptFailureName(f);
  }
}

TEST(DecideRetry, GivesUpAfterMaxAttempts) {
  EXPECT_EQ(DecideRetry(AttemptFailure::kConnect, false, 3, 3), RetryDecision::kGiveUp);
  EXPECT_EQ(DecideRetry(AttemptFailure::kConnect, false, 1, 1), RetryDecision::kGiveUp);
}

TEST(FailureOfStatus, ServerErrorsAreAttemptFailuresAndAnswersAreNot) {
  EXPECT_EQ(FailureOfStatus(500), AttemptFailure::kServerError);
  for (int s : {502, 503, 504}) EXPECT_EQ(FailureOfStatus(s), AttemptFailure::kUnavailable) << s;
  for (int s : {200, 400, 404, 413, 429, 501}) EXPECT_FALSE(FailureOfStatus(s).has_value()) << s;
}

TEST(FailureOf, MapsClientErrorsToAttemptFailures) {
  EXPECT_EQ(FailureOf(client::ErrorKind::kConnectRefused), AttemptFailure::kConnect);
  EXPECT_EQ(FailureOf(client::ErrorKind::kConnectTimeout), AttemptFailure::kConnect);
  EXPECT_EQ(FailureOf(client::ErrorKind::kFirstByteTimeout), AttemptFailure::kFirstByteTimeout);
  EXPECT_EQ(FailureOf(client::ErrorKind::kClosedEarly), AttemptFailure::kClosed);
  EXPECT_EQ(FailureOf(client::ErrorKind::kIdleTimeout), AttemptFailure::kIdleTimeout);
}

TEST(RequestIdFor, KeepsASaneClientIdAndGeneratesOtherwise) {
  net::HttpRequest r;
  r.headers = {{"x-request-id", "abc-123"}};
  EXPECT_EQ(RequestIdFor(r), "abc-123");
  r.headers = {{"x-request-id", "bad id with spaces"}};
  EXPECT_EQ(RequestIdFor(r).size(), 32u);
  r.headers.clear();
  EXPECT_NE(RequestIdFor(r), RequestIdFor(r));
}

// A fake worker: one HttpServer whose /v1/completions behaviour the test chooses.
struct FakeWorker {
  enum class Mode {
    kJson,
    kUnavailable,
    kServerError,
    kStream,
    kStreamThenDie,
    kStreamForever,
    kJsonNever
  };
  explicit FakeWorker(Mode m) : mode(m), server(net::ServerOptions{}) {
    auto handler = [this](const net::HttpRequest& r) -> net::HandlerResult {
      ++requests;
      last_request_id = std::string(r.Header("x-request-id"));
      last_body = r.body;
      switch (mode) {
        case Mode::kJson:
          if (r.target == "/v1/chat/completions") {
            return net::JsonResponse(
                200, R"({"id":"chatcmpl-7","choices":[{"message":{"role":"assistant",)"
                     R"("content":"hi"},"finish_reason":"stop"}],)"
                     R"("usage":{"prompt_tokens":3,"completion_tokens":1}})");
          }
          return net::JsonResponse(200, R"({"id":"cmpl-1","choices":[{"text":"hi"}]})");
        case Mode::kUnavailable:
          return net::JsonResponse(503, R"({"error":{"message":"draining"}})");
        case Mode::kServerError:
          return net::JsonResponse(500, R"({"error":{"message":"engine failed"}})");
        default:
          break;
      }
      auto queue = std::make_shared<net::ChunkQueue>([this] { ++cancelled; });
      net::HttpResponse res;
      res.content_type = "text/event-stream";
      res.stream = queue;
      Mode current = mode;
      std::thread([queue, m = current] {
        for (int i = 0; i < (m == Mode::kStreamForever ? 2000 : 5); ++i) {
          if (!queue->Push("data: {\"choices\":[{\"text\":\"t\"}]}\n\n")) return;
          std::this_thread::sleep_for(milliseconds(5));
        }
        if (m == Mode::kStreamThenDie) return;  // never closes: the server cuts it below
        queue->Push("data: [DONE]\n\n");
        queue->Close();
      }).detach();
      return res;
    };
    server.Handle("POST", "/v1/completions", handler);
    server.Handle("POST", "/v1/chat/completions", handler);
    EXPECT_TRUE(server.Start().has_value());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server.port()); }

  Mode mode;
  net::HttpServer server;
  std::atomic<int> requests{0};
  std::atomic<int> cancelled{0};
  std::string last_request_id;
  std::string last_body;
};

// SimpleTokenizer, except that encoding a text that contains "SLOW" blocks until Release()
// (bounded: 10 s): a prompt whose preparation takes as long as the test wants.
class GatedTokenizer final : public tokenize::Tokenizer {
 public:
  std::vector<TokenId> Encode(std::string_view text, bool add_special_tokens) const override {
    if (text.find("SLOW") != std::string_view::npos) {
      std::unique_lock lock(mu_);
      entered_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, seconds(10), [this] { return released_; });
    }
    return inner_.Encode(text, add_special_tokens);
  }
  std::expected<std::string, std::string> Decode(const std::vector<TokenId>& ids) const override {
    return inner_.Decode(ids);
  }
  std::expected<std::string, std::string> RenderChat(
      const tokenize::ChatRequest& request) const override {
    return inner_.RenderChat(request);
  }
  std::expected<std::vector<TokenId>, std::string> EncodeChat(
      const tokenize::ChatRequest& request) const override {
    return inner_.EncodeChat(request);
  }
  std::size_t VocabSize() const override { return inner_.VocabSize(); }
  TokenId EosTokenId() const override { return inner_.EosTokenId(); }

  // Whether a slow Encode has started (waits for it, bounded by `timeout`).
  bool WaitEntered(milliseconds timeout) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return entered_; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  tokenize::SimpleTokenizer inner_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable bool entered_ = false;
  bool released_ = false;
};

struct ProxySetup {
  bool shared_lane;     // the proxy runs on the front server's one lane
  int compute_threads;  // ProxyOptions::compute_threads
  const char* name;
};

// gtest prints a parameter's bytes unless told otherwise; ctest's test list then carries
// pointer values that change with every build. The name says all there is to say.
void PrintTo(const ProxySetup& setup, std::ostream* os) { *os << setup.name; }

class ProxyTest : public ::testing::TestWithParam<ProxySetup> {
 protected:
  // The router's in-flight count once it stops falling (bounded: 4 s). The proxy books a
  // request's end after its last byte went out, so a client can hold its answer a moment
  // before the count drops.
  auto InflightAfterItDrains() {
    for (int i = 0; i < 200 && router_state_.load().inflight() != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return router_state_.load().inflight();
  }

  void Start(std::vector<FakeWorker*> workers) {
    for (std::size_t i = 0; i < workers.size(); ++i) {
      fleet::WorkerSpec spec;
      spec.name = "w" + std::to_string(i);
      spec.base_url = workers[i]->url();
      spec.models = {"m"};
      ASSERT_TRUE(router_state_.Add(spec, clock_.Now()).has_value());
    }
    PipelineDeps deps;
    deps.router_state = &router_state_;
    deps.index = &index_;
    deps.predicted = &predicted_;
    deps.tokenizer = tokenizer_;
    deps.policy = *sched::BuiltinPolicy("round_robin");
    pipeline_ = std::make_unique<RequestPipeline>(std::move(deps), PipelineOptions{});
    ProxyOptions opts;
    opts.lanes = 1;
    opts.compute_threads = GetParam().compute_threads;
    opts.compute_min_body_bytes = 0;  // the tests' bodies are small: offload them all
    net::ServerOptions front_opts;
    if (GetParam().shared_lane) {
      lanes_ = std::make_shared<net::LanePool>(1);
      opts.lanes_pool = lanes_;
      front_opts.lanes = lanes_;
    }
    opts.timeouts.connect = milliseconds(500);
    opts.timeouts.first_byte = seconds(5);
    opts.timeouts.idle = seconds(5);
    proxy_ =
        std::make_unique<Proxy>(opts, pipeline_.get(), &router_state_, &metrics_, nullptr, &clock_);
    front_ = std::make_unique<net::HttpServer>(front_opts);
    front_->Handle("POST", "/v1/completions", [this](net::HttpRequest&& r) {
      return proxy_->Handle(api::Endpoint::kCompletions, std::move(r));
    });
    front_->Handle("POST", "/v1/messages",
                   [this](net::HttpRequest&& r) { return proxy_->HandleMessages(std::move(r)); });
    ASSERT_TRUE(front_->Start().has_value());
  }

  void TearDown() override {
    tokenizer_->Release();  // a test that failed half-way may have left one gated
    if (front_) front_->Shutdown(milliseconds(0));
    if (proxy_) proxy_->Stop();
    if (lanes_) lanes_->Stop();
  }

  net::testing::ParsedResponse Post(const std::string& body,
                                    const std::string& path = "/v1/completions") {
    net::testing::TestClient c;
    EXPECT_TRUE(c.Connect(front_->port()));
    c.Send(net::testing::TestClient::Post(path, body, false));
    return c.ReadResponse(seconds(10));
  }

  SteadyClock clock_;
  fleet::RouterState router_state_;
  kv::KvIndex index_{kv::BlockKeyer(16)};
  kv::PredictedBlocks predicted_;
  RouterMetrics metrics_;
  std::shared_ptr<GatedTokenizer> tokenizer_ = std::make_shared<GatedTokenizer>();
  std::unique_ptr<RequestPipeline> pipeline_;
  std::shared_ptr<net::LanePool> lanes_;  // shared by front_ and proxy_ (param true)
  std::unique_ptr<Proxy> proxy_;
  std::unique_ptr<net::HttpServer> front_;
};

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

// The reason for the compute pool: while one request on a lane is being prepared (parsed,
// tokenized), the streams relayed on that lane keep flowing. The slow request's tokenizer is
// held until the other stream has delivered 100 more events (500 ms of the fake worker's
// output); with Prepare inline on the one lane, that lane would be stuck in the tokenizer and
// the stream would deliver only what was already in its socket.
TEST_P(ProxyTest, AStreamKeepsFlowingWhileAnotherRequestOnItsLaneIsPrepared) {
  if (!GetParam().shared_lane || GetParam().compute_threads == 0) {
    GTEST_SKIP() << "needs the stream and the slow request on one lane, and a compute pool";
  }
  FakeWorker w(FakeWorker::Mode::kStreamForever);
  Start({&w});
  net::testing::TestClient streaming;
  ASSERT_TRUE(streaming.Connect(front_->port()));
  streaming.Send(net::testing::TestClient::Post(
      "/v1/completions", R"({"model":"m","prompt":"x","stream":true})", false));
  std::string got = streaming.ReadSome(100, seconds(5));
  ASSERT_NE(got.find("200"), std::string::npos);

  net::testing::TestClient slow;
  ASSERT_TRUE(slow.Connect(front_->port()));
  slow.Send(net::testing::TestClient::Post("/v1/completions",
                                           R"({"model":"m","prompt":"SLOW one"})", false));
  ASSERT_TRUE(tokenizer_->WaitEntered(seconds(5)));

  // The tokenizer is held from here until Release below.
  std::size_t events = 0;
  for (int i = 0; i < 200 && events < 100; ++i) {
    std::string piece = streaming.ReadSome(4096, milliseconds(50));
    for (std::size_t at = piece.find("data: "); at != std::string::npos;
         at = piece.find("data: ", at + 1)) {
      ++events;
    }
  }
  tokenizer_->Release();
  EXPECT_GE(events, 100u);
  streaming.Close();
  slow.Close();
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

// A route's load is booked where it is decided (the compute thread), not after the hand-off
// back to the lane: while the lane is held busy, the router already counts the request in
// flight, so the next decision on any thread sees it. (Booked on the lane, requests arriving
// together were all decided on the same idle snapshot.)
TEST_P(ProxyTest, ARouteIsBookedBeforeTheLaneResumes) {
  if (!GetParam().shared_lane || GetParam().compute_threads == 0) {
    GTEST_SKIP() << "needs a lane the test can hold and a compute pool";
  }
  FakeWorker w(FakeWorker::Mode::kJsonNever);
  Start({&w});
  net::testing::TestClient c;
  ASSERT_TRUE(c.Connect(front_->port()));
  c.Send(net::testing::TestClient::Post("/v1/completions", R"({"model":"m","prompt":"SLOW x"})",
                                        false));
  ASSERT_TRUE(tokenizer_->WaitEntered(seconds(5)));  // handed off: the lane is free again
  std::mutex mu;
  std::condition_variable cv;
  bool holding = false, release = false;
  boost::asio::post(lanes_->context(0), [&] {
    std::unique_lock lock(mu);
    holding = true;
    cv.notify_all();
    cv.wait_for(lock, seconds(10), [&] { return release; });
  });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, seconds(5), [&] { return holding; }));
  }
  tokenizer_->Release();
  for (int i = 0; i < 200 && router_state_.load().inflight() == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(router_state_.load().inflight(), 1u);  // the lane has not resumed the exchange yet
  EXPECT_EQ(w.requests.load(), 0);
  {
    std::lock_guard lock(mu);
    release = true;
    cv.notify_all();
  }
  for (int i = 0; i < 200 && w.requests.load() == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(w.requests.load(), 1);
  c.Close();
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
}  // namespace kvroute::gateway
