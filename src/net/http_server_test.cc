#include "net/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "net/body_queue.h"
#include "net/lane_pool.h"
#include "net/test_client.h"

namespace kvroute::net {
namespace {

using namespace std::chrono_literals;
using testing::ParsedResponse;
using testing::TestClient;

// Produces `count` pieces of `size` bytes, each only when pulled, and counts pulls: a
// producer that can never run ahead of the socket.
class CountingSource final : public BodySource {
 public:
  CountingSource(int count, std::size_t size) : count_(count), size_(size) {}
  void Pull(Deliver deliver) override {
    int n = pulls_.fetch_add(1);
    if (n >= count_ || cancelled_) return deliver(std::nullopt);
    deliver(std::string(size_, static_cast<char>('a' + n % 26)));
  }
  void Cancel() override { cancelled_ = true; }
  int pulls() const { return pulls_; }

 private:
  const int count_;
  const std::size_t size_;
  std::atomic<int> pulls_{0};
  std::atomic<bool> cancelled_{false};
};

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions options = {}) {
    server_ = std::make_unique<HttpServer>(options);
    server_->Handle("GET", "/hello",
                    [](const HttpRequest&) -> HandlerResult { return TextResponse(200, "hello"); });
    server_->Handle("POST", "/echo", [](const HttpRequest& r) -> HandlerResult {
      return TextResponse(200, r.body);
    });
    server_->Handle("GET", "/stream", [this](const HttpRequest&) -> HandlerResult {
      HttpResponse r;
      r.content_type = "text/event-stream";
      r.stream = stream_;
      return r;
    });
    server_->Handle("GET", "/deferred", [this](const HttpRequest&) -> HandlerResult {
      deferred_started_.set_value();
      return std::shared_ptr<DeferredResponse>(deferred_);
    });
    ASSERT_TRUE(server_->Start().has_value());
    ASSERT_NE(server_->port(), 0);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(0ms);
  }

  std::unique_ptr<HttpServer> server_;
  std::shared_ptr<BodySource> stream_;
  std::shared_ptr<DeferredSlot> deferred_;
  std::promise<void> deferred_started_;
};

TEST_F(HttpServerTest, AnswersARegisteredPath) {
  StartServer();
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  ASSERT_TRUE(c.Send(TestClient::Get("/hello")));
  auto r = c.ReadResponse();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer();
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  for (int i = 0; i < 3; ++i) {
    std::string body = "n=" + std::to_string(i);
    ASSERT_TRUE(c.Send(TestClient::Post("/echo", body)));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.complete);
    EXPECT_EQ(r.body, body);
  }
}

TEST_F(HttpServerTest, UnknownPathIs404AndWrongMethodIs405) {
  StartServer();
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  ASSERT_TRUE(c.Send(TestClient::Get("/nope")));
  EXPECT_EQ(c.ReadResponse().status, 404);
  ASSERT_TRUE(c.Send(TestClient::Get("/echo")));
  auto r = c.ReadResponse();
  EXPECT_EQ(r.status, 405);
  EXPECT_NE(r.head.find("Allow: POST"), std::string::npos);
}

TEST_F(HttpServerTest, BodyOverTheLimitIs413) {
  StartServer({.body_limit = 100});
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  ASSERT_TRUE(c.Send(TestClient::Post("/echo", std::string(1000, 'x'))));
  EXPECT_EQ(c.ReadResponse().status, 413);
}

// Request smuggling (RFC 9112 section 6.1): a request framed by both Content-Length and
// Transfer-Encoding is read differently by different parsers, so a proxy in front may see
// two requests where the server sees one. The server must answer 400 and close, serving
// nothing; it used to close with no answer at all.
class HttpServerFramingTest : public HttpServerTest {
 protected:
  void SetUp() override {
    server_ = std::make_unique<HttpServer>(ServerOptions{});
    server_->Handle("POST", "/echo", [this](const HttpRequest& r) -> HandlerResult {
      ++served_;
      return TextResponse(200, r.body);
    });
    ASSERT_TRUE(server_->Start().has_value());
  }
  // Sends `head` (request line + fields, without the blank line) and `body` as they are.
  ParsedResponse Exchange(TestClient& c, const std::string& head, const std::string& body) {
    EXPECT_TRUE(c.Connect(server_->port()));
    EXPECT_TRUE(c.Send(head + "\r\n\r\n" + body));
    return c.ReadResponse(5s);
  }
  // A 400 in the OpenAI error shape, Connection: close, and the server hangs up.
  void ExpectRefusedAndClosed(TestClient& c, const ParsedResponse& r) {
    EXPECT_EQ(r.status, 400) << r.head;
    EXPECT_TRUE(r.complete);
    EXPECT_NE(r.head.find("Connection: close"), std::string::npos) << r.head;
    EXPECT_NE(r.head.find("application/json"), std::string::npos) << r.head;
    EXPECT_NE(r.body.find(R"("error":{"message":"Bad Request)"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find(R"("code":400)"), std::string::npos) << r.body;
    EXPECT_TRUE(c.WaitClosed(5s));
    EXPECT_EQ(served_.load(), 0);
  }
  std::atomic<int> served_{0};
};

TEST_F(HttpServerFramingTest, ContentLengthThenChunkedIs400AndTheConnectionCloses) {
  TestClient c;
  auto r = Exchange(c,
                    "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                    "Transfer-Encoding: chunked",
                    "0\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  ExpectRefusedAndClosed(c, r);
  EXPECT_NE(r.body.find("Content-Length and Transfer-Encoding"), std::string::npos) << r.body;
}

TEST_F(HttpServerFramingTest, ChunkedThenContentLengthIs400AndTheConnectionCloses) {
  TestClient c;
  auto r = Exchange(c,
                    "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                    "Content-Length: 5",
                    "5\r\nhello\r\n0\r\n\r\n");
  ExpectRefusedAndClosed(c, r);
  EXPECT_NE(r.body.find("Content-Length and Transfer-Encoding"), std::string::npos) << r.body;
}

// Beast alone would read these by their Content-Length or guess; only a single chunked passes.
TEST_F(HttpServerFramingTest, ATransferEncodingOtherThanOneChunkedIs400) {
  for (const char* te : {"Transfer-Encoding: gzip\r\nContent-Length: 5", "Transfer-Encoding: gzip",
                         "Transfer-Encoding: chunked, chunked",
                         "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked"}) {
    TestClient c;
    auto r = Exchange(c, std::string("POST /echo HTTP/1.1\r\nHost: x\r\n") + te,
                      "5\r\nhello\r\n0\r\n\r\n");
    SCOPED_TRACE(te);
    ExpectRefusedAndClosed(c, r);
  }
}

TEST_F(HttpServerFramingTest, AMalformedRequestLineIs400AndTheConnectionCloses) {
  TestClient c;
  ExpectRefusedAndClosed(c, Exchange(c, "POST /echo HTTP/9\r\nHost: x", ""));
}

TEST_F(HttpServerFramingTest, ASingleChunkedBodyIsStillServed) {
  TestClient c;
  auto r = Exchange(c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked",
                    "5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(served_.load(), 1);
}

// A client that sends its whole body before it reads (Python's http.client, curl without
// Expect) must get the 413 the server decided at the header: closing a socket with unread
// bytes resets the connection, the client's send fails and it never reads the answer. The
// server lingers, reading, until the client is done.
TEST_F(HttpServerTest, ARefusedBodyCanBeSentInFullAndThenGetsIts413) {
  StartServer({.body_limit = 100});
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  const std::string body(4u << 20, 'x');  // more than loopback buffers hold
  EXPECT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body));
  auto r = c.ReadResponse(10s);
  EXPECT_EQ(r.status, 413) << r.head;
  EXPECT_NE(r.body.find(R"("code":413)"), std::string::npos) << r.body;
}

TEST_F(HttpServerTest, BodyAtTheLimitIsAccepted) {
  StartServer({.body_limit = 100});
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  ASSERT_TRUE(c.Send(TestClient::Post("/echo", std::string(100, 'x'))));
  auto r = c.ReadResponse();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), 100u);
}

TEST_F(HttpServerTest, StreamsPiecesAsChunksInOrder) {
  auto q = std::make_shared<ChunkQueue>();
  stream_ = q;
  StartServer();
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  ASSERT_TRUE(c.Send(TestClient::Get("/stream")));
  std::thread producer([q] {
    for (int i = 0; i < 50; ++i) q->Push("data: " + std::to_string(i) + "\n\n");
    q->Close();
  });
  auto r = c.ReadResponse();
  producer.join();
  ASSERT_TRUE(r.complete);
  EXPECT_TRUE(r.chunked);
  std::string expected;
  for (int i = 0; i < 50; ++i) expected += "data: " + std::to_string(i) + "\n\n";
  EXPECT_EQ(r.body, expected);
}

TEST_F(HttpServerTest, SlowReaderHoldsBackAPullBasedProducer) {
  // 64 pieces of 1 MiB: far more than loopback socket buffers hold. While the client reads
  // nothing, the server can pull only as much as the kernel accepted.
  auto source = std::make_shared<CountingSource>(64, 1u << 20);
  stream_ = source;
  StartServer();
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  ASSERT_TRUE(c.Send(TestClient::Get("/stream")));
  std::this_thread::sleep_for(300ms);  // let the server fill the socket buffers
  EXPECT_LT(source->pulls(), 64);
  auto r = c.ReadResponse(30s);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.body.size(), 64u << 20);
  EXPECT_EQ(source->pulls(), 65);  // 64 pieces + the end
}

TEST_F(HttpServerTest, ClientDisconnectCancelsTheStream) {
  std::promise<void> cancelled;
  auto q = std::make_shared<ChunkQueue>([&cancelled] { cancelled.set_value(); });
  stream_ = q;
  StartServer();
  {
    TestClient c;
    ASSERT_TRUE(c.Connect(server_->port()));
    ASSERT_TRUE(c.Send(TestClient::Get("/stream")));
    q->Push("data: first\n\n");
    ASSERT_FALSE(c.ReadSome(20, 5s).empty());
  }  // the client hangs up while the producer still has work
  EXPECT_EQ(cancelled.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(q->cancelled());
}

TEST_F(HttpServerTest, ClientDisconnectCancelsADeferredResponse) {
  std::promise<void> cancelled;
  deferred_ = std::make_shared<DeferredSlot>([&cancelled] { cancelled.set_value(); });
  StartServer();
  {
    TestClient c;
    ASSERT_TRUE(c.Connect(server_->port()));
    ASSERT_TRUE(c.Send(TestClient::Get("/deferred")));
    deferred_started_.get_future().wait();
  }
  EXPECT_EQ(cancelled.get_future().wait_for(10s), std::future_status::ready);
}

TEST_F(HttpServerTest, ShutdownWaitsForInFlightRequests) {
  deferred_ = std::make_shared<DeferredSlot>();
  StartServer();
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  ASSERT_TRUE(c.Send(TestClient::Get("/deferred")));
  deferred_started_.get_future().wait();
  auto cut = std::async(std::launch::async, [this] { return server_->Shutdown(30s); });
  // Once new connections are refused the server is draining; the in-flight request must
  // still complete.
  for (int i = 0; i < 500; ++i) {
    TestClient probe;
    if (!probe.Connect(server_->port())) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(server_->InFlight(), 1u);
  deferred_->Set(TextResponse(200, "done"));
  auto r = c.ReadResponse();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "done");
  EXPECT_EQ(cut.get(), 0u);
}

TEST_F(HttpServerTest, ShutdownCutsWhatRemainsAtTheDeadline) {
  std::atomic<bool> cancelled{false};
  deferred_ = std::make_shared<DeferredSlot>([&cancelled] { cancelled = true; });
  StartServer();
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  ASSERT_TRUE(c.Send(TestClient::Get("/deferred")));
  deferred_started_.get_future().wait();
  EXPECT_EQ(server_->Shutdown(50ms), 1u);
  EXPECT_TRUE(cancelled);
  auto r = c.ReadResponse(5s);
  EXPECT_NE(r.status, 200);
}

TEST_F(HttpServerTest, StopAcceptingRefusesNewConnectionsAndClosesIdleOnes) {
  StartServer();
  TestClient idle;
  ASSERT_TRUE(idle.Connect(server_->port()));
  ASSERT_TRUE(idle.Send(TestClient::Get("/hello")));
  ASSERT_EQ(idle.ReadResponse().status, 200);
  server_->StopAccepting();
  EXPECT_TRUE(idle.WaitClosed(5s));
  TestClient late;
  EXPECT_FALSE(late.Connect(server_->port()));
}

TEST_F(HttpServerTest, StartFailsWhenThePortIsTakenAndShutdownReturnsAtOnce) {
  StartServer();
  HttpServer second(ServerOptions{.port = server_->port()});
  auto started = second.Start();
  ASSERT_FALSE(started.has_value());
  EXPECT_NE(started.error().find("cannot listen"), std::string::npos);
  EXPECT_EQ(second.Shutdown(10s), 0u);  // nothing to drain: no wait
}

TEST_F(HttpServerTest, HandlerExceptionBecomes500) {
  server_ = std::make_unique<HttpServer>(ServerOptions{});
  server_->Handle("GET", "/throw",
                  [](const HttpRequest&) -> HandlerResult { throw std::runtime_error("boom"); });
  ASSERT_TRUE(server_->Start().has_value());
  TestClient c;
  ASSERT_TRUE(c.Connect(server_->port()));
  ASSERT_TRUE(c.Send(TestClient::Get("/throw")));
  auto r = c.ReadResponse();
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body.find("boom"), std::string::npos);
}

// Shared lanes (what `kvroute serve` does with its proxy): the handler runs on the lane its
// request names, connections are spread over every lane, and the lanes outlive the server.
TEST(HttpServerSharedLanes, HandlerRunsOnTheLaneItsRequestNames) {
  auto lanes = std::make_shared<LanePool>(2);
  HttpServer server(ServerOptions{.lanes = lanes});
  std::atomic<int> on_lane{0};
  std::atomic<int> off_lane{0};
  std::atomic<int> lane_mask{0};
  server.Handle("GET", "/where", [&](const HttpRequest& r) -> HandlerResult {
    (lanes->InLane(r.lane) ? on_lane : off_lane).fetch_add(1);
    if (r.lane >= 0) lane_mask.fetch_or(1 << r.lane);
    return TextResponse(200, std::to_string(r.lane));
  });
  ASSERT_TRUE(server.Start().has_value());
  for (int i = 0; i < 4; ++i) {  // a new connection each time: round robin over the lanes
    TestClient c;
    ASSERT_TRUE(c.Connect(server.port()));
    ASSERT_TRUE(c.Send(TestClient::Get("/where", false)));
    EXPECT_EQ(c.ReadResponse().status, 200);
  }
  EXPECT_EQ(on_lane.load(), 4);
  EXPECT_EQ(off_lane.load(), 0);
  EXPECT_EQ(lane_mask.load(), 0b11);
  server.Shutdown(0ms);
}

TEST(HttpServerSharedLanes, ShutdownLeavesSharedLanesRunning) {
  auto lanes = std::make_shared<LanePool>(1);
  {
    HttpServer server(ServerOptions{.lanes = lanes});
    server.Handle("GET", "/hello",
                  [](const HttpRequest&) -> HandlerResult { return TextResponse(200, "hello"); });
    ASSERT_TRUE(server.Start().has_value());
    TestClient c;
    ASSERT_TRUE(c.Connect(server.port()));
    ASSERT_TRUE(c.Send(TestClient::Get("/hello")));
    EXPECT_EQ(c.ReadResponse().body, "hello");
    server.Shutdown(0ms);
  }
  std::promise<bool> ran;
  auto result = ran.get_future();
  boost::asio::post(lanes->context(0), [&ran, &lanes] { ran.set_value(lanes->InLane(0)); });
  ASSERT_EQ(result.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(result.get());
}

TEST(HttpServerSharedLanes, AStreamProducedOnTheConnectionsOwnLaneIsRelayed) {
  // The producer completes each Pull inline on the lane's thread (as the proxy does when it
  // shares the lanes): the server must not complete the Pull inside the call, nor block.
  auto lanes = std::make_shared<LanePool>(1);
  HttpServer server(ServerOptions{.lanes = lanes});
  auto source = std::make_shared<CountingSource>(50, 10);
  server.Handle("GET", "/stream", [source](const HttpRequest&) -> HandlerResult {
    HttpResponse r;
    r.content_type = "text/event-stream";
    r.stream = source;
    return r;
  });
  ASSERT_TRUE(server.Start().has_value());
  TestClient c;
  ASSERT_TRUE(c.Connect(server.port()));
  ASSERT_TRUE(c.Send(TestClient::Get("/stream")));
  auto r = c.ReadResponse();
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.body.size(), 500u);
  EXPECT_EQ(source->pulls(), 51);
  server.Shutdown(0ms);
}

}  // namespace
}  // namespace kvroute::net
