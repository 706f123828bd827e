// Stream migration through the proxy (issue 21): a fake worker streams some tokens and is
// cut; the request resumes on the other fake worker; the client sees one stream.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "gateway/proxy/proxy_test_fixture.h"

namespace kvroute::gateway::proxytest {
namespace {

class MigrationTest : public ProxyTest {
 protected:
  // Sends a streamed request, waits until `before_cut` token events of `needle` reached the
  // client, cuts worker `dying` and reads the rest of the stream (to EOF, bounded).
  std::string StreamAndCut(const std::string& path, const std::string& body, FakeWorker& dying,
                           int before_cut, const std::string& needle) {
    EXPECT_TRUE(client_.Connect(front_->port()));
    client_.Send(net::testing::TestClient::Post(path, body, false));
    std::string all = ReadUntilCount(needle, before_cut);
    dying.server.Shutdown(milliseconds(0));
    return all + client_.ReadSome(1 << 20, seconds(10));  // to EOF (Connection: close)
  }

  // What the client reads until `needle` has come `n` times in all (bounded: 5 s).
  std::string ReadUntilCount(const std::string& needle, int n, std::string all = "") {
    const auto deadline = std::chrono::steady_clock::now() + seconds(5);
    while (Count(all, needle) < n && std::chrono::steady_clock::now() < deadline) {
      all += client_.ReadSome(1 << 16, milliseconds(50));
    }
    EXPECT_EQ(Count(all, needle), n) << all;
    return all;
  }

  static int Count(const std::string& text, const std::string& needle) {
    int n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  }

  double Migrations(const std::string& outcome) {
    const std::string text = metrics_.Expose();
    const std::string key = "kvroute_stream_migrations_total{outcome=\"" + outcome + "\"} ";
    auto at = text.find(key);
    return at == std::string::npos ? 0 : std::stod(text.substr(at + key.size()));
  }

  net::testing::TestClient client_;
};

TEST_P(MigrationTest, ACompletionStreamContinuesOnAnotherWorker) {
  FakeWorker dying(FakeWorker::Mode::kCountedStream);
  FakeWorker spare(FakeWorker::Mode::kCountedStream);
  dying.die_after = 3;
  max_migrations_ = 1;
  Start({&dying, &spare});  // round robin: the first request goes to w0, `dying`
  const std::string all = StreamAndCut(
      "/v1/completions", R"({"model":"m","prompt":"x","max_tokens":8,"stream":true})", dying, 3,
      R"("text":"a")");
  EXPECT_EQ(Count(all, R"("text":"a")"), 8) << all;
  EXPECT_EQ(Count(all, "data: [DONE]"), 1) << all;
  EXPECT_EQ(all.find("\"error\""), std::string::npos) << all;
  EXPECT_EQ(dying.requests.load(), 1);
  ASSERT_EQ(spare.requests.load(), 1);
  auto sent = boost::json::parse(spare.last_body).as_object();
  EXPECT_EQ(sent.at("prompt").as_string(), "xaaa");
  EXPECT_EQ(sent.at("max_tokens").to_number<int>(), 5);
  EXPECT_EQ(Migrations("resumed"), 1);
  EXPECT_EQ(InflightAfterItDrains(), 0u);  // each attempt's booking released once
}

TEST_P(MigrationTest, AChatStreamContinuesWithoutASecondRoleChunkAndWithTheOriginalUsage) {
  FakeWorker dying(FakeWorker::Mode::kCountedStream);
  FakeWorker spare(FakeWorker::Mode::kCountedStream);
  dying.die_after = 2;
  max_migrations_ = 1;
  Start({&dying, &spare});
  const std::string all = StreamAndCut(
      "/v1/chat/completions",
      R"({"model":"m","messages":[{"role":"user","content":"hey"}],"max_tokens":6,)"
      R"("stream":true,"stream_options":{"include_usage":true}})",
      dying, 2, R"("content":"a")");
  EXPECT_EQ(Count(all, R"("content":"a")"), 6) << all;
  EXPECT_EQ(Count(all, R"("role":"assistant")"), 1) << all;
  EXPECT_EQ(Count(all, "data: [DONE]"), 1) << all;
  EXPECT_EQ(all.find("\"error\""), std::string::npos) << all;
  // The spare saw "aa" as the assistant's text to continue: a 2-byte last message, so its
  // usage said prompt 2 + completion 4; the client is told the original request's view.
  EXPECT_NE(all.find(R"("prompt_tokens":0,"completion_tokens":6)"), std::string::npos) << all;
  ASSERT_EQ(spare.requests.load(), 1);
  auto sent = boost::json::parse(spare.last_body).as_object();
  EXPECT_TRUE(sent.at("continue_final_message").as_bool());
  EXPECT_EQ(sent.at("messages").as_array().back().at("content").as_string(), "aa");
  EXPECT_EQ(sent.at("max_tokens").to_number<int>(), 4);
}

TEST_P(MigrationTest, WithNoWorkerLeftTheStreamEndsWithAnErrorEvent) {
  FakeWorker dying(FakeWorker::Mode::kCountedStream);
  dying.die_after = 2;
  max_migrations_ = 1;
  Start({&dying});
  const std::string all = StreamAndCut(
      "/v1/completions", R"({"model":"m","prompt":"x","max_tokens":8,"stream":true})", dying, 2,
      R"("text":"a")");
  EXPECT_EQ(Count(all, R"("text":"a")"), 2) << all;
  EXPECT_NE(all.find("\"error\""), std::string::npos) << all;
  EXPECT_EQ(Count(all, "data: [DONE]"), 1) << all;
  EXPECT_EQ(Migrations("no_worker"), 1);
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

TEST_P(MigrationTest, AtTheLimitASecondDeathEndsTheStreamWithAnErrorEvent) {
  FakeWorker first(FakeWorker::Mode::kCountedStream);
  FakeWorker second(FakeWorker::Mode::kCountedStream);
  first.die_after = 2;
  second.die_after = 1;  // the continuation dies too; one migration allowed
  max_migrations_ = 1;
  Start({&first, &second});
  const std::string needle = R"("text":"a")";
  ASSERT_TRUE(client_.Connect(front_->port()));
  client_.Send(net::testing::TestClient::Post(
      "/v1/completions", R"({"model":"m","prompt":"x","max_tokens":8,"stream":true})", false));
  std::string all = ReadUntilCount(needle, 2);
  first.server.Shutdown(milliseconds(0));
  all = ReadUntilCount(needle, 3, all);  // the continuation's one token
  second.server.Shutdown(milliseconds(0));
  all += client_.ReadSome(1 << 20, seconds(10));
  EXPECT_EQ(Count(all, needle), 3) << all;
  EXPECT_NE(all.find("\"error\""), std::string::npos) << all;
  EXPECT_EQ(Count(all, "data: [DONE]"), 1) << all;
  EXPECT_EQ(Migrations("resumed"), 1);
  EXPECT_EQ(Migrations("limit"), 1);
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

TEST_P(MigrationTest, AStreamThatHadAllItsTokensOnlyGetsItsDone) {
  FakeWorker dying(FakeWorker::Mode::kCountedStream);
  dying.die_after = 4;  // = max_tokens: it dies before its [DONE]
  max_migrations_ = 1;
  Start({&dying});  // no other worker is needed
  const std::string all = StreamAndCut(
      "/v1/completions", R"({"model":"m","prompt":"x","max_tokens":4,"stream":true})", dying, 4,
      R"("text":"a")");
  EXPECT_EQ(Count(all, R"("text":"a")"), 4) << all;
  EXPECT_EQ(Count(all, "data: [DONE]"), 1) << all;
  EXPECT_EQ(all.find("\"error\""), std::string::npos) << all;
  EXPECT_EQ(Migrations("completed"), 1);
  EXPECT_EQ(InflightAfterItDrains(), 0u);
}

// The Messages API runs through the chat path: the client sees one Anthropic stream.
TEST_P(MigrationTest, AMessagesStreamContinuesAsOneAnthropicStream) {
  FakeWorker dying(FakeWorker::Mode::kCountedStream);
  FakeWorker spare(FakeWorker::Mode::kCountedStream);
  dying.die_after = 3;
  max_migrations_ = 1;
  Start({&dying, &spare});
  const std::string all = StreamAndCut(
      "/v1/messages",
      R"({"model":"m","max_tokens":7,"stream":true,"messages":[{"role":"user","content":"hey"}]})",
      dying, 3, "event: content_block_delta");
  EXPECT_EQ(Count(all, "event: content_block_delta"), 7) << all;
  EXPECT_EQ(Count(all, "event: message_start"), 1) << all;
  EXPECT_EQ(Count(all, "event: message_stop"), 1) << all;
  EXPECT_EQ(all.find("error"), std::string::npos) << all;
  EXPECT_NE(all.find(R"("output_tokens":7)"), std::string::npos) << all;
  ASSERT_EQ(spare.requests.load(), 1);
  auto sent = boost::json::parse(spare.last_body).as_object();
  EXPECT_EQ(sent.at("messages").as_array().back().at("content").as_string(), "aaa");
  EXPECT_EQ(Migrations("resumed"), 1);
}

INSTANTIATE_TEST_SUITE_P(Lanes, MigrationTest,
                         ::testing::Values(ProxySetup{false, -1, "OwnLanes"},
                                           ProxySetup{true, -1, "SharedWithServer"},
                                           ProxySetup{true, 0, "SharedWithServerInline"}),
                         [](const ::testing::TestParamInfo<ProxySetup>& param) {
                           return std::string(param.param.name);
                         });

}  // namespace
}  // namespace kvroute::gateway::proxytest
