// The client against a real loopback net::HttpServer (port 0): buffered and streamed
// answers, keep-alive reuse counted on the server side, every timeout, a server that cuts a
// stream, and cancellation.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "client/async_http_client.h"
#include "client/blocking_http_client.h"
#include "net/body_queue.h"
#include "net/http_server.h"

namespace kvroute::client {
namespace {

using namespace std::chrono_literals;

// An endless body: every Pull answers at once with a `piece_bytes` piece. Counts pulls so a
// test can see the producer stall when the client stops reading.
class EndlessSource final : public net::BodySource {
 public:
  explicit EndlessSource(std::size_t piece_bytes) : piece_(piece_bytes, 'x') {}
  void Pull(Deliver deliver) override {
    if (cancelled_) return deliver(std::nullopt);
    pulls_.fetch_add(1);
    deliver(piece_);
  }
  void Cancel() override { cancelled_ = true; }
  int pulls() const { return pulls_.load(); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::string piece_;
  std::atomic<int> pulls_{0};
  std::atomic<bool> cancelled_{false};
};

class HttpClientTest : public ::testing::Test {
 protected:
  void StartServer(net::ServerOptions options = {}) {
    server_ = std::make_unique<net::HttpServer>(options);
    server_->Handle("GET", "/hello", [this](const net::HttpRequest& r) {
      Record(r);
      auto res = net::TextResponse(200, "hello world");
      res.headers.emplace_back("X-Test", "yes");
      return res;
    });
    server_->Handle("POST", "/echo", [this](const net::HttpRequest& r) {
      Record(r);
      return net::TextResponse(200, r.body);
    });
    server_->Handle("GET", "/missing-thing",
                    [](const net::HttpRequest&) { return net::TextResponse(404, "nope"); });
    server_->Handle("GET", "/stream", [this](const net::HttpRequest& r) {
      Record(r);
      auto q = std::make_shared<net::ChunkQueue>();
      for (int i = 0; i < 20; ++i) q->Push("piece-" + std::to_string(i) + ";");
      q->Close();
      net::HttpResponse res;
      res.content_type = "text/event-stream";
      res.stream = q;
      return res;
    });
    server_->Handle("GET", "/endless", [this](const net::HttpRequest&) {
      net::HttpResponse res;
      res.stream = endless_;
      return res;
    });
    server_->Handle("GET", "/one-then-silence", [this](const net::HttpRequest&) {
      stuck_ = std::make_shared<net::ChunkQueue>();
      stuck_->Push("first");
      net::HttpResponse res;
      res.stream = stuck_;
      return res;
    });
    server_->Handle("GET", "/paced", [this](const net::HttpRequest&) {
      paced_ = std::make_shared<net::ChunkQueue>();
      net::HttpResponse res;
      res.stream = paced_;
      return res;
    });
    server_->Handle("GET", "/never", [this](const net::HttpRequest&) -> net::HandlerResult {
      never_ = std::make_shared<net::DeferredSlot>();
      return never_;
    });
    ASSERT_TRUE(server_->Start().has_value());
  }
  void TearDown() override {
    if (pacer_.joinable()) pacer_.join();
    if (stuck_) stuck_->Close();
    if (server_) server_->Shutdown(0ms);
  }
  void Record(const net::HttpRequest& r) {
    std::lock_guard lock(mu_);
    remotes_.insert(r.remote);
  }
  std::size_t DistinctConnections() {
    std::lock_guard lock(mu_);
    return remotes_.size();
  }
  ClientRequest Get(std::string target) {
    ClientRequest r;
    r.port = server_->port();
    r.target = std::move(target);
    return r;
  }

  std::unique_ptr<net::HttpServer> server_;
  std::shared_ptr<EndlessSource> endless_ = std::make_shared<EndlessSource>(256 * 1024);
  std::shared_ptr<net::ChunkQueue> stuck_;
  std::shared_ptr<net::ChunkQueue> paced_;  // /paced: pieces pushed by pacer_
  std::thread pacer_;
  std::shared_ptr<net::DeferredSlot> never_;
  std::mutex mu_;
  std::set<std::string> remotes_;
};

TEST_F(HttpClientTest, BufferedResponseHasStatusHeadersAndBody) {
  StartServer();
  BlockingHttpClient client;
  auto res = client.Send(Get("/hello"));
  ASSERT_TRUE(res.has_value()) << res.error().text;
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "hello world");
  EXPECT_EQ(res->Header("x-test"), "yes");
}

TEST_F(HttpClientTest, PostSendsTheBody) {
  StartServer();
  BlockingHttpClient client;
  ClientRequest r = Get("/echo");
  r.method = "POST";
  r.body = std::string(100'000, 'b') + "end";
  r.content_type = "application/json";
  auto res = client.Send(r);
  ASSERT_TRUE(res.has_value()) << res.error().text;
  EXPECT_EQ(res->body, r.body);
}

TEST_F(HttpClientTest, ASharedBodyIsSentInsteadOfTheOwnBodyAndCanBeSentAgain) {
  StartServer();
  BlockingHttpClient client;
  auto shared = std::make_shared<const std::string>(std::string(100'000, 'b') + "end");
  for (int i = 0; i < 2; ++i) {  // a retry sends the same bytes again
    ClientRequest r = Get("/echo");
    r.method = "POST";
    r.body = "ignored when shared_body is set";
    r.shared_body = shared;
    auto res = client.Send(r);
    ASSERT_TRUE(res.has_value()) << res.error().text;
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, *shared) << "send " << i;
  }
}

TEST_F(HttpClientTest, ErrorStatusIsAResponseNotAnError) {
  StartServer();
  BlockingHttpClient client;
  auto res = client.Send(Get("/missing-thing"));
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(res->body, "nope");
}

TEST_F(HttpClientTest, StreamDeliversEveryPieceToASlowConsumer) {
  StartServer();
  BlockingHttpClient client;
  auto stream = client.Stream(Get("/stream"));
  ASSERT_TRUE(stream.has_value()) << stream.error().text;
  EXPECT_EQ((*stream)->status(), 200);
  std::string all;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(5ms);  // slow consumer
    auto piece = (*stream)->Next();
    ASSERT_TRUE(piece.has_value()) << piece.error().text;
    if (!*piece) break;
    EXPECT_FALSE((*piece)->empty());
    all += **piece;
  }
  std::string expected;
  for (int i = 0; i < 20; ++i) expected += "piece-" + std::to_string(i) + ";";
  EXPECT_EQ(all, expected);
}

TEST_F(HttpClientTest, StreamThatIsNotReadStallsTheProducer) {
  StartServer();
  BlockingHttpClient client;
  auto stream = client.Stream(Get("/endless"));
  ASSERT_TRUE(stream.has_value()) << stream.error().text;
  ASSERT_TRUE((*stream)->Next().has_value());
  // Wait until the server stops pulling (socket buffers full), bounded in time.
  int last = -1;
  for (int i = 0; i < 50 && endless_->pulls() != last; ++i) {
    last = endless_->pulls();
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(endless_->pulls(), last) << "producer never stalled";
  EXPECT_LT(last, 400);  // < 100 MB: bounded by socket buffers, not by the endless source
  (*stream)->Cancel();
}

TEST_F(HttpClientTest, SequentialRequestsReuseOneConnection) {
  StartServer();
  BlockingHttpClient client;
  for (int i = 0; i < 5; ++i) {
    auto res = client.Send(Get("/hello"));
    ASSERT_TRUE(res.has_value()) << res.error().text;
  }
  auto stream = client.Stream(Get("/stream"));
  ASSERT_TRUE(stream.has_value());
  for (int i = 0; i < 100; ++i) {
    auto piece = (*stream)->Next();
    ASSERT_TRUE(piece.has_value());
    if (!*piece) break;
  }
  EXPECT_EQ(client.idle_connections(), 1u);  // a stream read to its end goes back to the pool
  ASSERT_TRUE(client.Send(Get("/hello")).has_value());
  EXPECT_EQ(DistinctConnections(), 1u);
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST_F(HttpClientTest, ConnectionClosedByServerWhileIdleIsRetriedOnANewOne) {
  net::ServerOptions options;
  options.idle_timeout = 50ms;
  StartServer(options);
  ClientOptions copt;
  copt.idle_expiry = 60s;  // keep the stale connection in the pool on purpose
  BlockingHttpClient client(copt);
  ASSERT_TRUE(client.Send(Get("/hello")).has_value());
  std::this_thread::sleep_for(300ms);  // the server closes the idle connection
  auto res = client.Send(Get("/hello"));
  ASSERT_TRUE(res.has_value()) << res.error().text;
  EXPECT_EQ(res->body, "hello world");
  EXPECT_EQ(client.connections_opened(), 2u);
}

TEST_F(HttpClientTest, ConnectToAClosedPortIsRefused) {
  // A port the OS just handed out and nobody listens on: bound, never listened, closed.
  // This test is about the client. A server stopped the instant it started (what this test
  // once used) is stressed in net/http_server_lifecycle_test.cc, where its acceptor race
  // was found and fixed.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const auto port = ntohs(addr.sin_port);
  ::close(fd);
  BlockingHttpClient client;
  ClientRequest r;
  r.port = port;
  auto res = client.Send(r);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kConnectRefused);
}

TEST_F(HttpClientTest, ConnectToAFullBacklogTimesOut) {
  // A listener that never accepts, with its accept queue filled: Linux drops further SYNs,
  // so the connect hangs until the client's connect timeout.
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(lfd, 0), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(fd);
  }
  std::this_thread::sleep_for(50ms);
  ClientOptions copt;
  copt.timeouts.connect = 300ms;
  BlockingHttpClient client(copt);
  ClientRequest r;
  r.port = ntohs(addr.sin_port);
  auto res = client.Send(r);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kConnectTimeout) << res.error().text;
  for (int fd : fillers) ::close(fd);
  ::close(lfd);
}

TEST_F(HttpClientTest, NoHeadersInTimeIsAFirstByteTimeout) {
  StartServer();
  ClientOptions copt;
  copt.timeouts.first_byte = 200ms;
  BlockingHttpClient client(copt);
  auto res = client.Send(Get("/never"));
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kFirstByteTimeout) << res.error().text;
}

TEST_F(HttpClientTest, SilenceBetweenPiecesIsAnIdleTimeout) {
  StartServer();
  ClientOptions copt;
  copt.timeouts.idle = 200ms;
  BlockingHttpClient client(copt);
  auto stream = client.Stream(Get("/one-then-silence"));
  ASSERT_TRUE(stream.has_value()) << stream.error().text;
  auto first = (*stream)->Next();
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ(**first, "first");
  auto second = (*stream)->Next();
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().kind, ErrorKind::kIdleTimeout) << second.error().text;
}

TEST_F(HttpClientTest, ExchangeLongerThanTheTotalLimitIsATotalTimeout) {
  StartServer();
  ClientRequest r = Get("/one-then-silence");
  r.timeouts = Timeouts{.connect = 1s, .first_byte = 5s, .idle = 5s, .total = 300ms};
  BlockingHttpClient client;
  auto stream = client.Stream(r);
  ASSERT_TRUE(stream.has_value()) << stream.error().text;
  ASSERT_TRUE((*stream)->Next().has_value());
  auto second = (*stream)->Next();
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().kind, ErrorKind::kTotalTimeout) << second.error().text;
}

TEST_F(HttpClientTest, ServerCuttingTheStreamIsClosedEarly) {
  StartServer();
  BlockingHttpClient client;
  auto stream = client.Stream(Get("/one-then-silence"));
  ASSERT_TRUE(stream.has_value()) << stream.error().text;
  ASSERT_TRUE((*stream)->Next().has_value());
  server_->Shutdown(0ms);  // cuts the stream without its last chunk
  auto next = (*stream)->Next();
  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error().kind, ErrorKind::kClosedEarly) << next.error().text;
  EXPECT_EQ(client.idle_connections(), 0u);
}

TEST_F(HttpClientTest, CancelledStreamFailsClosesAndIsNotPooled) {
  StartServer();
  BlockingHttpClient client;
  auto stream = client.Stream(Get("/endless"));
  ASSERT_TRUE(stream.has_value()) << stream.error().text;
  ASSERT_TRUE((*stream)->Next().has_value());
  (*stream)->Cancel();
  auto next = (*stream)->Next();
  ASSERT_FALSE(next.has_value());
  EXPECT_EQ(next.error().kind, ErrorKind::kCancelled);
  EXPECT_EQ(client.idle_connections(), 0u);
  // The server sees the disconnect and cancels its producer (bounded wait).
  for (int i = 0; i < 100 && !endless_->cancelled(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(endless_->cancelled());
  ASSERT_TRUE(client.Send(Get("/hello")).has_value());
  EXPECT_EQ(client.connections_opened(), 2u);
}

TEST_F(HttpClientTest, AbandonedStreamIsNotReused) {
  StartServer();
  BlockingHttpClient client;
  {
    auto stream = client.Stream(Get("/stream"));
    ASSERT_TRUE(stream.has_value());
  }  // destroyed before its end
  ASSERT_TRUE(client.Send(Get("/hello")).has_value());
  EXPECT_EQ(client.connections_opened(), 2u);
}

// The idle timer is armed once per idle period, not per piece: pieces keep arriving (each
// gap well inside the limit) past the moment the first arming would have expired, and the
// stream must not time out; the silence that follows must.
TEST_F(HttpClientTest, IdleLimitCountsFromTheLatestReadWhenPiecesOutliveTheFirstArming) {
  StartServer();
  ClientOptions copt;
  copt.timeouts.idle = 300ms;
  BlockingHttpClient client(copt);
  auto stream = client.Stream(Get("/paced"));
  ASSERT_TRUE(stream.has_value()) << stream.error().text;
  ASSERT_NE(paced_, nullptr);
  constexpr int kPieces = 25;  // 25 x 30 ms: twice the idle limit in total
  pacer_ = std::thread([q = paced_] {
    for (int i = 0; i < kPieces; ++i) {
      std::this_thread::sleep_for(30ms);
      q->Push("p" + std::to_string(i) + ";");
    }
  });
  std::string all;
  std::optional<ClientError> error;
  for (int i = 0; i < 200 && !error; ++i) {
    auto piece = (*stream)->Next();
    if (!piece) {
      error = piece.error();
      break;
    }
    ASSERT_TRUE(piece->has_value());  // the producer never ends the body
    all += **piece;
  }
  std::string expected;
  for (int i = 0; i < kPieces; ++i) expected += "p" + std::to_string(i) + ";";
  EXPECT_EQ(all, expected);  // every piece arrived before the stream timed out
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind, ErrorKind::kIdleTimeout) << error->text;
  paced_->Close();
}

// Time between two Next() calls is the consumer's, not the server's: only a waiting read
// counts against the idle limit.
TEST_F(HttpClientTest, ConsumerSlowerThanTheIdleLimitIsNotATimeout) {
  StartServer();
  ClientOptions copt;
  copt.timeouts.idle = 100ms;
  BlockingHttpClient client(copt);
  auto stream = client.Stream(Get("/endless"));
  ASSERT_TRUE(stream.has_value()) << stream.error().text;
  for (int i = 0; i < 3; ++i) {
    auto piece = (*stream)->Next();
    ASSERT_TRUE(piece.has_value()) << "read " << i << ": " << piece.error().text;
    ASSERT_TRUE(piece->has_value());
    std::this_thread::sleep_for(250ms);  // the armed deadline passes while nobody reads
  }
  (*stream)->Cancel();
}

// ReadNext (the callback form the gateway's relay uses) yields the same pieces as Next(),
// then the end of the body, and the connection goes back to the pool.
TEST_F(HttpClientTest, ReadNextCallbacksDeliverTheWholeBodyThenTheEnd) {
  StartServer();
  boost::asio::io_context io;
  AsyncHttpClient client(io.get_executor());
  std::unique_ptr<ResponseStream> stream;
  std::optional<ClientError> open_error;
  boost::asio::co_spawn(
      io,
      [](AsyncHttpClient* c, ClientRequest r, std::unique_ptr<ResponseStream>* out,
         std::optional<ClientError>* err) -> boost::asio::awaitable<void> {
        auto s = co_await c->Stream(std::move(r));
        if (s) {
          *out = std::move(*s);
        } else {
          *err = s.error();
        }
      }(&client, Get("/stream"), &stream, &open_error),
      boost::asio::detached);
  io.run_for(5s);
  io.restart();
  ASSERT_FALSE(open_error.has_value()) << open_error->text;
  ASSERT_NE(stream, nullptr);

  std::string all;
  bool ended = false;
  std::string error;  // text of a failed read
  int calls = 0;
  std::function<void()> read_one = [&] {
    ++calls;
    stream->ReadNext([&](ResponseStream::NextResult r) {
      if (!r.has_value()) {
        error = "failed: " + r.error().text;
      } else if (!r->has_value()) {
        ended = true;
      } else if (calls < 100) {
        all += **r;
        read_one();
      }
    });
  };
  read_one();
  io.run_for(5s);
  ASSERT_EQ(error, "");
  EXPECT_TRUE(ended);
  std::string expected;
  for (int i = 0; i < 20; ++i) expected += "piece-" + std::to_string(i) + ";";
  EXPECT_EQ(all, expected);
  EXPECT_EQ(client.idle_connections(), 1u);
}

}  // namespace
}  // namespace kvroute::client
