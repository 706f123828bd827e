// RunBenchmark against an in-process fake OpenAI server (net::HttpServer on port 0) that
// records every request body, streams `max_tokens` content chunks plus a usage chunk, and
// exports vLLM's prefix-cache counters.
#include "bench/runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "net/body_queue.h"
#include "net/http_server.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::bench {
namespace {
namespace json = boost::json;

class FakeOpenAi {
 public:
  FakeOpenAi() : server_(net::ServerOptions{}) {
    server_.Handle("GET", "/v1/models", [](const net::HttpRequest&) {
      return net::JsonResponse(200, R"({"object":"list","data":[{"id":"fake-model"}]})");
    });
    server_.Handle("GET", "/metrics", [this](const net::HttpRequest&) {
      std::lock_guard lock(mu_);
      return net::TextResponse(
          200, "vllm:prefix_cache_queries_total{engine=\"0\"} " + std::to_string(queries_) +
                   "\nvllm:prefix_cache_hits_total{engine=\"0\"} " + std::to_string(hits_) + "\n");
    });
    auto handler = [this](const net::HttpRequest& r) { return Complete(r); };
    server_.Handle("POST", "/v1/chat/completions", handler);
    server_.Handle("POST", "/v1/completions", handler);
    EXPECT_TRUE(server_.Start().has_value());
  }
  ~FakeOpenAi() { server_.Shutdown(std::chrono::milliseconds(0)); }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  std::vector<json::object> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::atomic<bool> fail_with_500{false};
  std::atomic<int> chunk_gap_ms{0};  // > 0: stream the chunks this far apart

  // The reply of a request asking for n tokens.
  static std::string Reply(int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += "w" + std::to_string(i) + " ";
    return s;
  }

 private:
  net::HttpResponse Complete(const net::HttpRequest& r) {
    if (fail_with_500) return net::JsonResponse(500, R"({"error":{"message":"boom"}})");
    json::object body = json::parse(r.body).as_object();
    // Prompt "tokens": bytes of the prompt text / 4; cached: the longest common prefix with
    // any earlier prompt, in whole 16-token blocks — a crude prefix cache.
    std::string prompt;
    if (auto* msgs = body.if_contains("messages")) {
      for (const auto& m : msgs->as_array()) prompt += json::serialize(m);
    } else {
      prompt = json::serialize(body.at("prompt"));
    }
    const int max_tokens = static_cast<int>(body.at("max_tokens").to_number<int>());
    std::uint64_t prompt_tokens = prompt.size() / 4, cached = 0;
    {
      std::lock_guard lock(mu_);
      bodies_.push_back(body);
      for (const std::string& p : prompts_) {
        std::size_t n = 0;
        while (n < p.size() && n < prompt.size() && p[n] == prompt[n]) ++n;
        cached = std::max<std::uint64_t>(cached, (n / 4) / 16 * 16);
      }
      prompts_.push_back(prompt);
      queries_ += prompt_tokens;
      hits_ += cached;
    }
    const bool chat = body.contains("messages");
    auto q = std::make_shared<net::ChunkQueue>();
    std::vector<std::string> pieces;
    pieces.push_back(R"(data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})"
                     "\n\n");
    for (int i = 0; i < max_tokens; ++i) {
      const std::string text = "w" + std::to_string(i) + " ";
      json::object choice{{"index", 0}};
      if (chat) {
        choice["delta"] = json::object{{"content", text}};
      } else {
        choice["text"] = text;
      }
      pieces.push_back("data: " + json::serialize(json::object{{"choices", json::array{choice}}}) +
                       "\n\n");
    }
    json::object usage{{"prompt_tokens", prompt_tokens},
                       {"completion_tokens", max_tokens},
                       {"prompt_tokens_details", json::object{{"cached_tokens", cached}}}};
    pieces.push_back(
        "data: " + json::serialize(json::object{{"choices", json::array{}}, {"usage", usage}}) +
        "\n\ndata: [DONE]\n\n");
    const int gap_ms = chunk_gap_ms.load();
    if (gap_ms <= 0) {
      for (auto& p : pieces) q->Push(std::move(p));
      q->Close();
    } else {
      // Paced: one piece per gap from another thread (the queue is thread-safe), so the client
      // sees real inter-token gaps. Owns only the queue and the pieces, never the fake.
      std::thread([q, pieces = std::move(pieces), gap_ms]() mutable {
        for (auto& p : pieces) {
          std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
          q->Push(std::move(p));
        }
        q->Close();
      }).detach();
    }
    net::HttpResponse res;
    res.content_type = "text/event-stream";
    res.stream = q;
    return res;
  }

  net::HttpServer server_;
  std::mutex mu_;
  std::vector<json::object> bodies_;
  std::vector<std::string> prompts_;
  std::uint64_t queries_ = 0, hits_ = 0;
};

RunnerOptions SmallAgentic(const FakeOpenAi& fake) {
  RunnerOptions o;
  o.target_url = fake.url();
  o.workload = "agentic";
  o.agentic.common_prefix_tokens = 64;
  o.agentic.session_prefix_tokens = 32;
  o.agentic.turns = 3;
  o.agentic.turn_input_tokens = 16;
  o.agentic.output_tokens = 5;
  o.concurrency = {1};
  o.progress = false;
  o.tokenizer = std::make_shared<tokenize::SimpleTokenizer>();
  return o;
}

TEST(RunBenchmark, AgenticTurnsCarryTheWholeHistoryWithTheRealReply) {
  FakeOpenAi fake;
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(SmallAgentic(fake), report).has_value());
  auto bodies = fake.bodies();
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_EQ(bodies[0].at("model").as_string(), "fake-model");  // discovered from /v1/models
  const json::array& third = bodies[2].at("messages").as_array();
  ASSERT_EQ(third.size(), 6u);  // system, user, assistant, user, assistant, user
  EXPECT_EQ(third[0].as_object().at("role").as_string(), "system");
  EXPECT_EQ(third[2].as_object().at("role").as_string(), "assistant");
  EXPECT_EQ(third[2].as_object().at("content").as_string(), FakeOpenAi::Reply(5));
  EXPECT_EQ(third[5].as_object().at("role").as_string(), "user");
  EXPECT_TRUE(bodies[2].at("ignore_eos").as_bool());
}

// The client waits workload::AgenticTurnPause (model time) after each request before its next one:
// every gap between a request's end and the same worker's next send is at least that pause
// (a lower bound the timer guarantees; nothing here asserts how fast anything is).
TEST(RunBenchmark, AgenticClientPausesTheSharedTurnPauseBetweenRequests) {
  FakeOpenAi fake;
  RunnerOptions o = SmallAgentic(fake);
  o.agentic.sessions = 2;  // one worker runs two sessions: the pause also precedes session 1
  o.turn_pause = {std::chrono::milliseconds(20), std::chrono::milliseconds(40)};
  o.time_scale = 2;  // waited 1/2 in wall time; the report is in model time
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(o, report).has_value());
  ASSERT_EQ(report.levels.size(), 1u);
  const auto& reqs = report.levels[0].requests;
  ASSERT_EQ(reqs.size(), 6u);
  for (std::size_t i = 1; i < reqs.size(); ++i) {
    const auto& prev = reqs[i - 1];
    const double end = prev.result.start_s + prev.result.e2e_s;
    const double pause = ToSeconds(workload::AgenticTurnPause(o.turn_pause, o.seed, prev.session, prev.turn));
    EXPECT_GE(reqs[i].result.start_s - end, pause - 1e-6) << "request " << i;
  }
}

TEST(RunBenchmark, AgenticWallPauseIsTheModelPauseOverTheTimeScale) {
  RunnerOptions o;
  o.turn_pause = {std::chrono::milliseconds(10), std::chrono::milliseconds(50)};
  o.time_scale = 4;
  for (int turn = 0; turn < 4; ++turn) {
    EXPECT_DOUBLE_EQ(AgenticWallPause(o, 5, 2, turn).count(),
                     ToSeconds(workload::AgenticTurnPause(o.turn_pause, 5, 2, turn)) / 4);
  }
}

TEST(RunBenchmark, AgenticResultsCountEveryTokenAndCachedTokensGrow) {
  FakeOpenAi fake;
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(SmallAgentic(fake), report).has_value());
  ASSERT_EQ(report.levels.size(), 1u);
  const auto& reqs = report.levels[0].requests;
  ASSERT_EQ(reqs.size(), 3u);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_TRUE(reqs[i].result.ok) << reqs[i].result.error_kind;
    EXPECT_EQ(reqs[i].result.output_tokens, 5u);
    EXPECT_EQ(reqs[i].result.itl_s.size(), 4u);  // one gap per content chunk after the first
    EXPECT_EQ(reqs[i].turn, static_cast<int>(i));
  }
  EXPECT_LT(reqs[0].result.cached_tokens, reqs[1].result.cached_tokens);
  EXPECT_LT(reqs[1].result.cached_tokens, reqs[2].result.cached_tokens);
}

TEST(RunBenchmark, HitRateComesFromTheScrapedCounters) {
  FakeOpenAi fake;
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(SmallAgentic(fake), report).has_value());
  double prompt = 0, cached = 0;
  for (const auto& r : report.levels[0].requests) {
    prompt += r.result.prompt_tokens;
    cached += r.result.cached_tokens;
  }
  ASSERT_TRUE(report.levels[0].hit_rate.has_value());
  EXPECT_DOUBLE_EQ(*report.levels[0].hit_rate, cached / prompt);
}

TEST(RunBenchmark, ConcurrencySweepRunsOneLevelPerEntry) {
  FakeOpenAi fake;
  RunnerOptions o = SmallAgentic(fake);
  o.concurrency = {1, 2};
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(o, report).has_value());
  ASSERT_EQ(report.levels.size(), 2u);
  EXPECT_EQ(report.levels[0].name, "c=1");
  EXPECT_EQ(report.levels[0].requests.size(), 3u);
  EXPECT_EQ(report.levels[1].concurrency, 2);
  EXPECT_EQ(report.levels[1].requests.size(), 6u);
}

TEST(RunBenchmark, StopRuleEndsTheSweepAfterTheLevelWhoseMeanItlCrossed) {
  FakeOpenAi fake;
  fake.chunk_gap_ms = 2;  // >= 2 ms wall per gap = >= 2 s of model time at time_scale 1000
  RunnerOptions o = SmallAgentic(fake);
  o.agentic.turns = 1;
  o.concurrency = {1, 2, 4};
  o.time_scale = 1000;
  o.stop_mean_itl_s = 0.040;
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(o, report).has_value());
  ASSERT_EQ(report.levels.size(), 1u);
  ASSERT_TRUE(report.sweep_stop.has_value());
  EXPECT_EQ(report.sweep_stop->after_level, "c=1");
  EXPECT_GT(report.sweep_stop->mean_itl_s, 0.040);
  EXPECT_EQ(report.sweep_stop->skipped, (std::vector<int>{2, 4}));
  EXPECT_DOUBLE_EQ(report.stop_mean_itl_s, 0.040);
}

TEST(RunBenchmark, StopRuleBelowItsThresholdRunsEveryLevel) {
  FakeOpenAi fake;
  fake.chunk_gap_ms = 2;
  RunnerOptions o = SmallAgentic(fake);
  o.agentic.turns = 1;
  o.concurrency = {1, 2};
  o.stop_mean_itl_s = 3600;  // an hour per token: never crossed
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(o, report).has_value());
  EXPECT_EQ(report.levels.size(), 2u);
  EXPECT_FALSE(report.sweep_stop.has_value());
}

// vLLM's multi-turn tool with --warmup-step: every session's first turn is sent first and
// kept out of the level; the measured pass starts each session at its second turn, after the
// warm-up reply.
TEST(RunBenchmark, WarmupStepSendsFirstTurnsFirstAndMeasuresFromTheSecond) {
  FakeOpenAi fake;
  RunnerOptions o = SmallAgentic(fake);
  o.concurrency = {2};
  o.agentic.sessions = 3;
  o.procedure.warmup_step = true;
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(o, report).has_value());
  const auto bodies = fake.bodies();
  ASSERT_EQ(bodies.size(), 9u);  // 3 sessions x 3 turns: nothing skipped without early stop
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(bodies[i].at("messages").as_array().size(), 2u) << i;  // system, first user turn
  }
  const auto& level = report.levels[0];
  double first_measured = 1e300, last_end = 0, warmup_end = 0;
  int warmups = 0;
  for (const auto& rec : level.requests) {
    const double end = rec.result.start_s + rec.result.e2e_s;
    EXPECT_EQ(rec.warmup, rec.turn == 0);
    if (rec.warmup) {
      ++warmups;
      warmup_end = std::max(warmup_end, end);
    } else {
      first_measured = std::min(first_measured, rec.result.start_s);
      last_end = std::max(last_end, end);
    }
  }
  EXPECT_EQ(warmups, 3);
  EXPECT_GE(first_measured, warmup_end);
  EXPECT_NEAR(level.duration_s, last_end - first_measured, 1e-9);
  EXPECT_EQ(workload::SummarizeLevel(level, std::nullopt).sent, 6u);
  // A second turn carries the warm-up's own reply as history.
  const json::array& second = bodies[3].at("messages").as_array();
  ASSERT_EQ(second.size(), 4u);  // system, user, assistant, user
  EXPECT_EQ(second[2].as_object().at("content").as_string(), FakeOpenAi::Reply(5));
}

// The tool's early stop: once one client has no session left nothing more is sent. Two
// sessions, one per client, each turn followed by a seeded pause; a seed whose pauses put
// every send of the slower session far (>= 100 ms, against requests of about a millisecond)
// from the end of the faster one, so which of its turns go out before that end is known.
TEST(RunBenchmark, EarlyStopSendsNothingAfterTheFirstClientRunsOut) {
  FakeOpenAi fake;
  RunnerOptions o = SmallAgentic(fake);  // 3 turns
  o.concurrency = {2};
  o.turn_pause = {std::chrono::milliseconds(0), std::chrono::milliseconds(400)};
  const auto send_times = [&](std::uint64_t seed, int session) {  // of turns 1 and 2
    const double p0 = ToSeconds(workload::AgenticTurnPause(o.turn_pause, seed, session, 0));
    const double p1 = ToSeconds(workload::AgenticTurnPause(o.turn_pause, seed, session, 1));
    return std::pair(p0, p0 + p1);
  };
  std::size_t expected = 0;
  for (std::uint64_t seed = 1;; ++seed) {
    const auto a = send_times(seed, 0), b = send_times(seed, 1);
    const auto& fast = a.second < b.second ? a : b;
    const auto& slow = a.second < b.second ? b : a;
    if (std::abs(slow.first - fast.second) < 0.1 || slow.second - fast.second < 0.1) continue;
    o.seed = seed;
    // The faster session's 3 turns, the slower one's first (sent at 0) and its second if that
    // went out before the faster one ended; its third never does.
    expected = 3 + 1 + (slow.first < fast.second ? 1 : 0);
    break;
  }
  for (bool early_stop : {false, true}) {
    o.procedure.early_stop = early_stop;
    workload::RunReport report;
    ASSERT_TRUE(RunBenchmark(o, report).has_value());
    EXPECT_EQ(report.levels[0].requests.size(), early_stop ? expected : 6u) << "seed " << o.seed;
  }
}

TEST(RunBenchmark, MaxRequestsBoundsALevel) {
  FakeOpenAi fake;
  RunnerOptions o = SmallAgentic(fake);
  o.max_requests = 2;
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(o, report).has_value());
  EXPECT_EQ(report.levels[0].requests.size(), 2u);
}

TEST(RunBenchmark, ServerErrorIsRecordedByKind) {
  FakeOpenAi fake;
  fake.fail_with_500 = true;
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(SmallAgentic(fake), report).has_value());
  const auto& reqs = report.levels[0].requests;
  ASSERT_EQ(reqs.size(), 1u);  // a failed turn ends its session
  EXPECT_FALSE(reqs[0].result.ok);
  EXPECT_EQ(reqs[0].result.error_kind, "http_5xx");
}

TEST(RunBenchmark, UnreachableTargetIsAConnectError) {
  RunnerOptions o;
  {
    FakeOpenAi gone;
    o = SmallAgentic(gone);
  }
  o.request_timeout_s = 5;
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(o, report).has_value());
  ASSERT_EQ(report.levels[0].requests.size(), 1u);
  EXPECT_EQ(report.levels[0].requests[0].result.error_kind, "connect_refused");
  EXPECT_FALSE(report.levels[0].hit_rate.has_value());  // no /metrics: unknown, not 0
}

TEST(RunBenchmark, TraceReplaySendsTokenIdPromptsOfTheTraceLengths) {
  FakeOpenAi fake;
  const auto path = std::filesystem::temp_directory_path() /
                    ("kvroute_runner_test_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream f(path);
    f << R"({"timestamp": 0, "input_length": 1024, "output_length": 3, "hash_ids": [1, 2]})"
      << "\n"
      << R"({"timestamp": 10, "input_length": 1024, "output_length": 4, "hash_ids": [1, 3]})"
      << "\n";
  }
  RunnerOptions o = SmallAgentic(fake);
  o.workload = "trace";
  o.trace_path = path.string();
  o.prefix_multiplier = 0.25;
  workload::RunReport report;
  ASSERT_TRUE(RunBenchmark(o, report).has_value());
  std::filesystem::remove(path);
  auto bodies = fake.bodies();
  ASSERT_EQ(bodies.size(), 2u);
  const json::array& p0 = bodies[0].at("prompt").as_array();
  const json::array& p1 = bodies[1].at("prompt").as_array();
  ASSERT_EQ(p0.size(), 256u);
  ASSERT_EQ(p1.size(), 256u);
  for (std::size_t i = 0; i < 128; ++i) ASSERT_EQ(p0[i], p1[i]) << i;  // shared hash id 1
  EXPECT_NE(std::vector<json::value>(p0.begin() + 128, p0.end()),
            std::vector<json::value>(p1.begin() + 128, p1.end()));
  EXPECT_EQ(bodies[1].at("max_tokens").as_int64(), 4);
  ASSERT_EQ(report.levels[0].requests.size(), 2u);
  EXPECT_TRUE(report.levels[0].requests[1].result.ok);
}

TEST(RunBenchmark, UnknownWorkloadIsASetupError) {
  FakeOpenAi fake;
  RunnerOptions o = SmallAgentic(fake);
  o.workload = "nope";
  workload::RunReport report;
  EXPECT_FALSE(RunBenchmark(o, report).has_value());
}

TEST(VocabularyPalette, HoldsDistinctNonSpecialIds) {
  tokenize::SimpleTokenizer tok;
  auto palette = VocabularyPalette(tok, 1);
  ASSERT_GT(palette.size(), 100u);
  for (TokenId id : palette) EXPECT_GE(id, tokenize::SimpleTokenizer::kBase);
  EXPECT_TRUE(std::is_sorted(palette.begin(), palette.end()));
}

}  // namespace
}  // namespace kvroute::bench
