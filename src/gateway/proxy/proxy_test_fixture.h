// The loopback fixture of the proxy's tests (proxy_test.cc, proxy_lane_test.cc): fake workers
// (net::HttpServer on port 0) whose behaviour each test chooses, a tokenizer that can hold a
// request in Prepare, and ProxyTest, parameterised over the three lane setups (see
// proxy_test.cc). Test-only.
#pragma once

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

namespace kvroute::gateway::proxytest {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A fake worker: one HttpServer whose /v1/completions behaviour the test chooses.
struct FakeWorker {
  enum class Mode {
    kJson,
    kUnavailable,
    kServerError,
    kStream,
    kStreamThenDie,
    kStreamDoneThenDie,  // the whole stream, [DONE] included, but the body never ends
    kStreamForever,
    kJsonNever,
    // Stream migration: streams the body's max_tokens (or max_completion_tokens) tokens, each
    // "a" (chat: after the role chunk; a usage chunk when stream_options.include_usage, its
    // prompt_tokens the prompt's or last message's length in bytes). With `die_after` >= 0
    // it sends that many tokens (all of them: all but [DONE]) and then hangs (the test cuts it
    // with server.Shutdown).
    kCountedStream
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
      if (mode == Mode::kCountedStream) return CountedStream(r);
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
        if (m == Mode::kStreamDoneThenDie) return;  // no last chunk: the server cuts it
        queue->Close();
      }).detach();
      return res;
    };
    server.Handle("POST", "/v1/completions", handler);
    server.Handle("POST", "/v1/chat/completions", handler);
    EXPECT_TRUE(server.Start().has_value());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server.port()); }

  net::HandlerResult CountedStream(const net::HttpRequest& r) {
    boost::json::object body = boost::json::parse(r.body).as_object();
    const bool chat = r.target == "/v1/chat/completions";
    int tokens = 0;
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
      if (const auto* v = body.if_contains(key)) tokens = v->to_number<int>();
    }
    std::size_t prompt_bytes = 0;
    if (chat) {
      const auto& last = body.at("messages").as_array().back().at("content");
      prompt_bytes = last.is_string() ? last.as_string().size() : 0;
    } else {
      prompt_bytes = body.at("prompt").as_string().size();
    }
    const auto* so = body.if_contains("stream_options");
    const bool usage = so != nullptr && so->as_object().contains("include_usage");
    auto queue = std::make_shared<net::ChunkQueue>([this] { ++cancelled; });
    net::HttpResponse res;
    res.content_type = "text/event-stream";
    res.stream = queue;
    const int stop = die_after.load();
    std::thread([queue, chat, tokens, prompt_bytes, usage, stop] {
      if (chat) {
        queue->Push(R"(data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})"
                    "\n\n");
      }
      for (int i = 0; i < tokens; ++i) {
        if (i == stop) return;  // hangs: the server cuts it
        std::string finish = i + 1 == tokens ? R"("length")" : "null";
        if (!queue->Push(chat ? R"(data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":)" +
                                    finish + "}]}\n\n"
                              : R"(data: {"choices":[{"index":0,"text":"a","finish_reason":)" +
                                    finish + "}]}\n\n")) {
          return;
        }
        std::this_thread::sleep_for(milliseconds(5));
      }
      if (stop == tokens) return;  // every token, then it hangs before [DONE]
      if (usage) {
        queue->Push(R"(data: {"choices":[],"usage":{"prompt_tokens":)" +
                    std::to_string(prompt_bytes) + R"(,"completion_tokens":)" +
                    std::to_string(tokens) + R"(,"total_tokens":)" +
                    std::to_string(prompt_bytes + tokens) + "}}\n\n");
      }
      queue->Push("data: [DONE]\n\n");
      queue->Close();
    }).detach();
    return res;
  }

  Mode mode;
  net::HttpServer server;
  std::atomic<int> requests{0};
  std::atomic<int> cancelled{0};
  std::string last_request_id;
  std::string last_body;
  std::atomic<int> die_after{-1};  // kCountedStream
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
inline void PrintTo(const ProxySetup& setup, std::ostream* os) { *os << setup.name; }

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
    opts.max_migrations = max_migrations_;
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
    front_->Handle("POST", "/v1/chat/completions", [this](net::HttpRequest&& r) {
      return proxy_->Handle(api::Endpoint::kChatCompletions, std::move(r));
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

  int max_migrations_ = 0;  // ProxyOptions::max_migrations, set before Start
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


}  // namespace kvroute::gateway::proxytest
