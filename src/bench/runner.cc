// RunBenchmark: one io_context on the calling thread; each level is one coroutine that
// spawns its workers (closed loop) or one coroutine per arrival (open loop) and waits for
// them. Everything runs on that one thread, so the level state needs no locks.
#include "bench/runner.h"

// GCC 12 reports a false -Wmismatched-new-delete on Asio's coroutine frame allocator when a
// coroutine returns a large value (GCC bug 105847 family); the frame is allocated and freed by
// the same awaitable_frame_base operators.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <optional>
#include <set>

#include "api/sse_parser.h"
#include "bench/metrics_scrape.h"
#include "bench/runner_levels.h"
#include "bench/runner_request.h"
#include "workload/time_base.h"
#include "workload/trace.h"
#include "workload/trace_expand.h"
#include "client/async_http_client.h"

namespace kvroute::bench {
namespace runner_internal {

using namespace std::chrono_literals;

asio::awaitable<std::string> Runner::DiscoverModel() {
  client::ClientRequest r;
  r.host = target_.host;
  r.port = target_.port;
  r.target = base_path_ + "/v1/models";
  r.timeouts = client::Timeouts{.connect = 5s, .first_byte = 10s, .idle = 10s, .total = 15s};
  auto res = co_await http_.Send(r);
  if (res && res->status == 200) {
    boost::system::error_code ec;
    auto v = boost::json::parse(res->body, ec);
    if (!ec && v.is_object()) {
      if (auto* data = v.as_object().if_contains("data");
          data && data->is_array() && !data->as_array().empty()) {
        const auto& first = data->as_array().front();
        if (first.is_object()) {
          if (auto* id = first.as_object().if_contains("id"); id && id->is_string()) {
            co_return std::string(id->as_string());
          }
        }
      }
    }
  }
  co_return std::string("default");
}

asio::awaitable<CacheCounters> Runner::ScrapeAll() {
  CacheCounters sum;
  std::vector<std::string> urls = options_.metrics_urls;
  if (urls.empty()) urls.push_back(options_.target_url + "/metrics");
  for (const std::string& url : urls) {
    auto req = client::MakeRequest("GET", url);
    if (!req) continue;
    req->timeouts = client::Timeouts{.connect = 2s, .first_byte = 5s, .idle = 5s, .total = 10s};
    auto res = co_await http_.Send(*req);
    if (!res || res->status != 200) continue;  // a worker without metrics: no hit rate from it
    Accumulate(sum, ReadCacheCounters(res->body));
  }
  co_return sum;
}

asio::awaitable<std::pair<workload::RequestResult, std::string>> Runner::SendStreamed(std::string path,
                                                                            std::string body) {
  StreamAccounting acc(Now());
  auto stream = co_await http_.Stream(Post(std::move(path), std::move(body)));
  if (!stream) {
    co_return std::pair(acc.Finish(Now(), client::ErrorKindName(stream.error().kind)),
                        std::string());
  }
  client::ResponseStream& s = **stream;
  if (s.status() != 200) {
    for (int i = 0; i < 1000; ++i) {  // drain the (small) error body so the connection is reused
      auto piece = co_await s.Next();
      if (!piece || !*piece) break;
    }
    co_return std::pair(acc.Finish(Now(), s.status() >= 500 ? "http_5xx" : "http_4xx"),
                        std::string());
  }
  api::SseParser parser;
  std::vector<api::SseMessage> events;
  for (;;) {
    auto piece = co_await s.Next();
    const double now = Now();
    if (!piece) {
      co_return std::pair(acc.Finish(now, client::ErrorKindName(piece.error().kind)),
                          std::string());
    }
    if (!*piece) break;
    events.clear();
    if (!parser.Feed(**piece, events)) {
      s.Cancel();
      co_return std::pair(acc.Finish(now, "stream"), std::string());
    }
    for (const api::SseMessage& ev : events) {
      if (ev.done) {
        acc.OnDone(now);
      } else if (!acc.OnEvent(ev.data, now)) {
        s.Cancel();
        co_return std::pair(acc.Finish(now), std::string());
      }
    }
  }
  workload::RequestResult result = acc.Finish(Now());
  co_return std::pair(std::move(result), acc.reply());
}

asio::awaitable<void> Runner::Progress(LevelState& level) {
  if (!options_.progress) co_return;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  // In place 4 times a second on a terminal; a line every 5 s into a log.
  const auto tick = tty ? 250ms : 5000ms;
  asio::steady_timer timer(ioc_);
  auto next_print = std::chrono::steady_clock::now() + tick;
  while (!level.finished) {
    timer.expires_after(50ms);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (std::chrono::steady_clock::now() < next_print && !level.finished) continue;
    next_print = std::chrono::steady_clock::now() + tick;
    std::fprintf(stderr, "%s[bench] level %-9s done %6d  errors %4d  in flight %4d  %7.1f s%s",
                 tty ? "\r" : "", level.result.name.c_str(), level.done, level.errors,
                 level.in_flight, level.Elapsed(), tty ? "   " : "\n");
  }
  if (tty) std::fprintf(stderr, "\n");
}

asio::awaitable<void> Runner::WaitFinished(LevelState& level) {
  asio::steady_timer timer(ioc_);
  while (level.in_flight > 0) {  // each request is bounded by its total timeout
    timer.expires_after(10ms);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  level.finished = true;
}

asio::awaitable<void> Runner::AgenticWorker(LevelState& level,
                                            const std::vector<workload::AgenticSession>& sessions,
                                            std::uint64_t seed, int& next_session,
                                            WarmupAnswers* warmup, const WarmupAnswers* answers) {
  // The pause owed since this worker's previous request ended (keyed by that request's
  // session and turn, as the simulator keys it); the next session is taken at once, as the
  // simulator assigns it when the previous request ends.
  std::optional<std::chrono::duration<double>> pause;
  asio::steady_timer timer(ioc_);
  while (next_session < static_cast<int>(sessions.size())) {
    const int si = next_session++;
    const workload::AgenticSession& session = sessions[si];
    std::vector<Message> messages{{"system", session.system_prompt}};
    std::size_t first = 0;
    if (answers != nullptr) {  // the warm-up sent turn 0; its reply is the history
      messages.push_back({"user", session.user_turns[0]});
      if ((*answers)[si]) messages.push_back({"assistant", *(*answers)[si]});
      first = 1;
      // A client's first measured request waits the pause its warm-up turn would have been
      // followed by; a later session's waits the pause owed by the one before (the simulator's
      // keys).
      if (!pause && options_.turn_pause.enabled()) pause = AgenticWallPause(options_, seed, si, 0);
    }
    const std::size_t end = warmup != nullptr ? std::min<std::size_t>(1, session.user_turns.size())
                                              : session.user_turns.size();
    for (std::size_t turn = first; turn < end; ++turn) {
      if (pause && pause->count() > 0) {
        timer.expires_after(
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(*pause));
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      }
      pause.reset();
      if (!level.TryLaunch()) co_return;
      messages.push_back({"user", session.user_turns[turn]});
      auto [result, reply] = co_await SendStreamed(
          "/v1/chat/completions", ChatRequestBody(model_, messages, session.output_tokens));
      const bool ok = result.ok;
      workload::RequestRecord rec{std::move(result), si, static_cast<int>(turn)};
      rec.warmup = warmup != nullptr;
      level.Record(std::move(rec));
      if (options_.turn_pause.enabled()) {
        pause = AgenticWallPause(options_, seed, si, static_cast<int>(turn));
      }
      if (warmup != nullptr) {
        if (ok) (*warmup)[si] = std::move(reply);
        break;
      }
      if (!ok) break;  // the history is broken: move on to the next session
      messages.push_back({"assistant", std::move(reply)});
    }
  }
  // Early stop (vLLM's multi-turn tool): the first client without a session left ends the
  // level's sending; the others' requests in flight finish and count.
  if (warmup == nullptr && options_.procedure.early_stop) level.stopped = true;
}

asio::awaitable<void> Runner::AgenticLevel(LevelState& level, int concurrency, int level_index) {
  workload::AgenticOptions a = options_.agentic;
  a.sessions = std::max(a.sessions, concurrency);
  // Fresh session texts per level (the common prefix stays common within the level), so one
  // level's cache does not serve the next.
  a.seed = options_.seed + 1000003ull * static_cast<std::uint64_t>(level_index);
  const std::vector<workload::AgenticSession> sessions = workload::MakeAgenticSessions(*options_.tokenizer, a);
  asio::steady_timer timer(ioc_);
  // One pass of `concurrency` clients over every session; the warm-up step is a pass of its
  // own that ends before the measured one starts (the tool runs them one after the other).
  WarmupAnswers answers(sessions.size());
  const auto pass = [&](WarmupAnswers* warmup, const WarmupAnswers* from) -> asio::awaitable<void> {
    int next_session = 0;
    int workers = concurrency;
    for (int w = 0; w < concurrency; ++w) {
      asio::co_spawn(
          ioc_,
          [&]() -> asio::awaitable<void> {
            co_await AgenticWorker(level, sessions, a.seed, next_session, warmup, from);
            --workers;
          },
          [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
          });
    }
    while (workers > 0) {
      timer.expires_after(10ms);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  };
  if (options_.procedure.warmup_step) {
    co_await pass(&answers, nullptr);
    co_await pass(nullptr, &answers);
  } else {
    co_await pass(nullptr, nullptr);
  }
  level.finished = true;
}

asio::awaitable<void> Runner::OpenLoopLevel(
    LevelState& level, std::vector<double> arrivals,
    std::function<std::pair<std::string, std::string>(int)> job, std::function<int(int)> group_of) {
  asio::steady_timer timer(ioc_);
  for (int i = 0; i < static_cast<int>(arrivals.size()); ++i) {
    const auto at = level.started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(arrivals[i]));
    if (at > std::chrono::steady_clock::now()) {
      timer.expires_at(at);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    if (!level.TryLaunch()) break;
    auto [path, body] = job(i);
    asio::co_spawn(
        ioc_,
        [this, &level, i, group = group_of(i), path = std::move(path),
         body = std::move(body)]() mutable -> asio::awaitable<void> {
          auto [result, reply] = co_await SendStreamed(std::move(path), std::move(body));
          level.Record(workload::RequestRecord{std::move(result), group, i});
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
  }
  co_await WaitFinished(level);
}

std::expected<void, std::string> Runner::RunLevel(
    workload::RunReport& report, workload::LevelResult shape,
    const std::function<asio::awaitable<void>(LevelState&)>& body) {
  CacheCounters before = RunSync(ioc_, ScrapeAll());
  LevelState level;
  level.result = std::move(shape);
  if (options_.duration_s > 0)
    level.stop_after_s = std::min(options_.duration_s, kHardMaxLevelSeconds);
  if (options_.max_requests > 0)
    level.max_requests = std::min(options_.max_requests, kHardMaxRequests);
  level.started = std::chrono::steady_clock::now();
  asio::co_spawn(ioc_, Progress(level), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  RunSync(ioc_, [&]() -> asio::awaitable<bool> {
    co_await body(level);
    co_return true;
  }());
  CacheCounters after = RunSync(ioc_, ScrapeAll());
  if (level.first_send_s && level.last_end_s) {
    level.result.duration_s = *level.last_end_s - *level.first_send_s;
  }
  workload::ScaleToModelTime(level.result, options_.time_scale);
  if (before.queries && after.queries && before.hits && after.hits) {
    level.result.hit_rate = workload::HitRate(*before.queries, *after.queries, *before.hits, *after.hits);
  }
  if (before.external_queries && after.external_queries && before.external_hits &&
      after.external_hits) {
    level.result.external_hit_rate = workload::HitRate(*before.external_queries, *after.external_queries,
                                             *before.external_hits, *after.external_hits);
  }
  // Per tier (kvroute sim with a lower tier): that tier's hits over every prompt token queried.
  if (before.queries && after.queries && *after.queries > *before.queries) {
    std::array<double, kNumTiers> by_tier{};
    bool any = false;
    for (int t = 0; t < kNumTiers; ++t) {
      if (!before.tier_hits[t] || !after.tier_hits[t]) continue;
      by_tier[t] = (*after.tier_hits[t] - *before.tier_hits[t]) / (*after.queries - *before.queries);
      any = true;
    }
    if (any) level.result.tier_hit_rate = by_tier;
  }
  // Order requests by send time: completion order depends on the server.
  std::sort(level.result.requests.begin(), level.result.requests.end(),
            [](const workload::RequestRecord& a, const workload::RequestRecord& b) {
              return a.result.start_s < b.result.start_s;
            });
  report.levels.push_back(std::move(level.result));
  return {};
}

}  // namespace runner_internal

std::chrono::duration<double> AgenticWallPause(const RunnerOptions& options, std::uint64_t seed,
                                               int session, int turn) {
  const double scale = options.time_scale > 0 ? options.time_scale : 1.0;
  return std::chrono::duration<double>(
      ToSeconds(workload::AgenticTurnPause(options.turn_pause, seed, session, turn)) / scale);
}

std::vector<TokenId> VocabularyPalette(const tokenize::Tokenizer& tokenizer, std::uint64_t seed) {
  const std::string text = workload::MakeText(tokenizer, 4096, seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<TokenId> ids = tokenizer.Encode(text, /*add_special_tokens=*/false);
  std::set<TokenId> distinct(ids.begin(), ids.end());
  distinct.erase(tokenizer.EosTokenId());
  return std::vector<TokenId>(distinct.begin(), distinct.end());
}

std::expected<void, std::string> RunBenchmark(const RunnerOptions& options, workload::RunReport& report) {
  if (!options.tokenizer) return std::unexpected("no tokenizer");
  auto url = client::ParseUrl(options.target_url);
  if (!url) return std::unexpected(url.error());
  runner_internal::Runner runner(options, std::move(*url));
  return runner.Run(report);
}

}  // namespace kvroute::bench
