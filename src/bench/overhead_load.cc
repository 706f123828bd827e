// RunOverheadLoad: one io_context on the calling thread, `concurrency` worker coroutines
// sharing one request counter; all state is touched on that thread only, so no locks.
#include "bench/overhead_load.h"

// GCC 12 reports a false -Wmismatched-new-delete on Asio's coroutine frame allocator (see
// runner.cc): the frame is allocated and freed by the same awaitable_frame_base operators.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>

#include "api/sse_parser.h"
#include "client/async_http_client.h"

namespace kvroute::bench {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Whether an SSE data payload carries generated text (chat delta.content or completion text).
// Returns nullopt when the payload is not a JSON object or is an error object.
std::optional<bool> HasContent(std::string_view data) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(data, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto& o = v.as_object();
  if (o.contains("error")) return std::nullopt;
  const auto* choices = o.if_contains("choices");
  if (choices == nullptr || !choices->is_array()) return false;
  for (const auto& c : choices->as_array()) {
    if (!c.is_object()) continue;
    const auto& co = c.as_object();
    const boost::json::value* text = nullptr;
    if (const auto* delta = co.if_contains("delta"); delta && delta->is_object()) {
      text = delta->as_object().if_contains("content");
    } else {
      text = co.if_contains("text");
    }
    if (text && text->is_string() && !text->as_string().empty()) return true;
  }
  return false;
}

class Load {
 public:
  explicit Load(const OverheadLoadOptions& o, std::vector<client::Url> urls)
      : o_(o), urls_(std::move(urls)), http_(ioc_.get_executor(), ClientOptionsFor(o)) {}

  OverheadLoadResult Run() {
    started_ = Clock::now();
    workers_ = o_.concurrency;
    for (int w = 0; w < o_.concurrency; ++w) {
      asio::co_spawn(ioc_, Worker(), [this](std::exception_ptr e) {
        --workers_;
        if (e) failure_ = e;
      });
    }
    if (o_.progress) asio::co_spawn(ioc_, Progress(), asio::detached);
    ioc_.run();
    if (failure_) std::rethrow_exception(failure_);
    if (first_recorded_ && last_end_) result_.elapsed_s = *last_end_ - *first_recorded_;
    result_.completed = done_;
    return std::move(result_);
  }

 private:
  static client::ClientOptions ClientOptionsFor(const OverheadLoadOptions& o) {
    client::ClientOptions c;
    const auto total = std::chrono::milliseconds(static_cast<long>(o.request_timeout_s * 1000));
    c.timeouts.total = total;
    c.timeouts.first_byte = total;
    c.timeouts.idle = total;
    c.max_idle_per_origin = static_cast<std::size_t>(std::max(64, o.concurrency * 2));
    return c;
  }

  double Now() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }

  int Total() const { return o_.warmup_requests + o_.requests; }

  asio::awaitable<void> Worker() {
    for (;;) {
      if (next_ >= Total() || Now() >= o_.duration_s) co_return;
      const int i = next_++;
      const client::Url& url = urls_[static_cast<std::size_t>(i) % urls_.size()];
      client::ClientRequest req;
      req.method = "POST";
      req.host = url.host;
      req.port = url.port;
      req.target = TrimSlash(url.target) + o_.path;
      req.body = o_.bodies[static_cast<std::size_t>(i) % o_.bodies.size()];
      req.content_type = "application/json";
      const bool recorded = i >= o_.warmup_requests;
      OverheadSample s;
      s.start_s = Now();
      if (recorded) first_recorded_ = std::min(first_recorded_.value_or(s.start_s), s.start_s);
      if (o_.stream) {
        co_await Streamed(std::move(req), s);
      } else {
        co_await Buffered(std::move(req), s);
      }
      s.e2e_s = Now() - s.start_s;
      ++done_;
      if (!s.error_kind.empty()) ++errors_;
      if (!recorded) {
        if (!s.error_kind.empty()) ++result_.warmup_errors;
        continue;
      }
      last_end_ = std::max(last_end_.value_or(0.0), s.start_s + s.e2e_s);
      result_.samples.push_back(std::move(s));
    }
  }

  static std::string TrimSlash(std::string p) {
    while (!p.empty() && p.back() == '/') p.pop_back();
    return p;
  }

  asio::awaitable<void> Buffered(client::ClientRequest req, OverheadSample& s) {
    auto res = co_await http_.Send(std::move(req));
    s.latency_s = Now() - s.start_s;
    if (!res) {
      s.error_kind = std::string(client::ErrorKindName(res.error().kind));
    } else if (res->status != 200) {
      s.error_kind = res->status >= 500 ? "http_5xx" : "http_4xx";
    } else if (res->body.find("\"choices\"") == std::string::npos) {
      s.error_kind = "body";
    }
  }

  asio::awaitable<void> Streamed(client::ClientRequest req, OverheadSample& s) {
    auto stream = co_await http_.Stream(std::move(req));
    if (!stream) {
      s.error_kind = std::string(client::ErrorKindName(stream.error().kind));
      co_return;
    }
    client::ResponseStream& rs = **stream;
    if (rs.status() != 200) {
      for (int k = 0; k < 1000; ++k) {  // drain the small error body: the connection is reused
        auto piece = co_await rs.Next();
        if (!piece || !*piece) break;
      }
      s.error_kind = rs.status() >= 500 ? "http_5xx" : "http_4xx";
      co_return;
    }
    api::SseParser parser;
    std::vector<api::SseMessage> events;
    bool content_seen = false, done = false;
    for (;;) {
      auto piece = co_await rs.Next();
      const double now = Now();
      if (!piece) {
        s.error_kind = std::string(client::ErrorKindName(piece.error().kind));
        co_return;
      }
      if (!*piece) break;
      events.clear();
      if (!parser.Feed(**piece, events)) {
        rs.Cancel();
        s.error_kind = "stream";
        co_return;
      }
      for (const api::SseMessage& ev : events) {
        if (ev.done) {
          done = true;
          continue;
        }
        ++s.chunks;
        // Parse only what decides TTFT, or what may be an error object.
        if (!content_seen || ev.data.find("\"error\"") != std::string::npos) {
          const auto content = HasContent(ev.data);
          if (!content) {
            rs.Cancel();
            s.error_kind = "stream";
            co_return;
          }
          if (*content && !content_seen) {
            content_seen = true;
            s.latency_s = now - s.start_s;
          }
        }
      }
    }
    if (!done || !content_seen) s.error_kind = "stream";
  }

  asio::awaitable<void> Progress() {
    const bool tty = ::isatty(STDERR_FILENO) != 0;
    const auto tick = tty ? 250ms : 5000ms;
    asio::steady_timer timer(ioc_);
    auto next_print = Clock::now() + tick;
    while (workers_ > 0) {
      timer.expires_after(50ms);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (Clock::now() < next_print && workers_ > 0) continue;
      next_print = Clock::now() + tick;
      std::fprintf(stderr, "%s[overhead] %-32s done %6d/%-6d errors %4d  %6.1f s%s",
                   tty ? "\r" : "", o_.progress_label.c_str(), done_, Total(), errors_, Now(),
                   tty ? "   " : "\n");
    }
    if (tty) std::fprintf(stderr, "\n");
  }

  const OverheadLoadOptions& o_;
  std::vector<client::Url> urls_;
  asio::io_context ioc_;
  client::AsyncHttpClient http_;
  Clock::time_point started_;
  int next_ = 0, done_ = 0, errors_ = 0, workers_ = 0;
  std::optional<double> first_recorded_, last_end_;
  std::exception_ptr failure_;
  OverheadLoadResult result_;
};

}  // namespace

std::string OverheadChatBody(std::string_view model, std::string_view prompt,
                             std::uint32_t max_tokens, bool stream) {
  boost::json::object body{
      {"model", model},
      {"messages", boost::json::array{boost::json::object{{"role", "user"}, {"content", prompt}}}},
      {"max_tokens", max_tokens},
      {"ignore_eos", true},
      {"temperature", 0},
      {"stream", stream}};
  return boost::json::serialize(body);
}

std::expected<OverheadLoadResult, std::string> RunOverheadLoad(const OverheadLoadOptions& options) {
  if (options.urls.empty()) return std::unexpected("no target URL");
  if (options.bodies.empty()) return std::unexpected("no request body");
  if (options.concurrency < 1) return std::unexpected("concurrency must be >= 1");
  std::vector<client::Url> urls;
  for (const std::string& u : options.urls) {
    auto parsed = client::ParseUrl(u);
    if (!parsed) return std::unexpected("bad URL " + u + ": " + parsed.error());
    urls.push_back(std::move(*parsed));
  }
  Load load(options, std::move(urls));
  return load.Run();
}

}  // namespace kvroute::bench
