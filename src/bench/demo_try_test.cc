#include "bench/demo_try.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvroute::bench {
namespace {

TEST(DemoTryTest, TheProbeIsAChatRequestWithALongSystemPrompt) {
  auto doc = boost::json::parse(CacheProbeBody("Qwen/Qwen3-32B")).as_object();
  EXPECT_EQ(doc.at("model").as_string(), "Qwen/Qwen3-32B");
  const auto& messages = doc.at("messages").as_array();
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].at("role").as_string(), "system");
  // Many 16-token KV blocks, so the second request has a prefix to find.
  EXPECT_GE(messages[0].at("content").as_string().size(), 4000u);
  EXPECT_LE(doc.at("max_tokens").as_int64(), 32);
}

TEST(DemoTryTest, TheCacheCommandSendsTheProbeTwiceAndShowsWorkerAndCachedTokens) {
  const std::string text = TryItText("http://127.0.0.1:8123", "m", "/tmp/it's/probe.json");
  const std::size_t loop =
      text.find("for i in 1 2; do curl -s -i http://127.0.0.1:8123/v1/chat/completions");
  ASSERT_NE(loop, std::string::npos) << text;
  const std::string line = text.substr(loop, text.find('\n', loop) - loop);
  EXPECT_NE(line.find("-d @'/tmp/it'\\''s/probe.json'"), std::string::npos) << line;  // quoted
  EXPECT_NE(line.find("x-kvroute-worker"), std::string::npos) << line;
  EXPECT_NE(line.find("cached_tokens"), std::string::npos) << line;
  EXPECT_NE(line.find("; done"), std::string::npos) << line;
  EXPECT_NE(text.find("curl -N http://127.0.0.1:8123/v1/chat/completions"), std::string::npos);
  EXPECT_NE(text.find("/debug/route"), std::string::npos);
  EXPECT_NE(text.find("/metrics"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::bench
