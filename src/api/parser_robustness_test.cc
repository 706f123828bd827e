// Seeded mutation tests: every parser must answer any byte string with a value or a 400,
// never crash, throw or read out of bounds (run under ASan/UBSan in the sanitizer build).
// Counts and seeds are fixed, so a failure reproduces exactly.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>

#include "api/anthropic_messages.h"
#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/sse_parser.h"
#include "api/tokenize_api.h"

namespace kvroute::api {
namespace {

const std::vector<std::string> kSeeds = {
    R"({"model":"m","prompt":"hello","max_tokens":5,"stream":true,"stream_options":{}})",
    R"({"model":"m","prompt":[[1,2,3]],"temperature":0.5,"stop":["a"]})",
    R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]},)"
    R"({"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f",)"
    R"("arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{}]})",
    R"({"model":"c","max_tokens":3,"system":"s","messages":[{"role":"user","content":[)"
    R"({"type":"tool_result","tool_use_id":"t","content":"x"}]}]})",
    R"({"tokens":[1,2,3],"prompt":"x"})",
};

// One random edit: flip, insert, delete or duplicate a span.
std::string Mutate(std::string s, std::mt19937& rng) {
  static const std::string kAlphabet = "{}[]\":,0123456789.-eE truefalsnul\\\xff\x80";
  const int edits = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const std::size_t pos = std::uniform_int_distribution<std::size_t>(0, s.size() - 1)(rng);
    const char c =
        kAlphabet[std::uniform_int_distribution<std::size_t>(0, kAlphabet.size() - 1)(rng)];
    switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
      case 0:
        s[pos] = c;
        break;
      case 1:
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), c);
        break;
      case 2:
        s.erase(pos, 1);
        break;
      default:
        s.insert(pos, s.substr(pos, 8));
        break;
    }
  }
  return s;
}

template <typename Result>
void ExpectValueOr400(const Result& r, const std::string& body) {
  if (!r) {
    EXPECT_EQ(r.error().status, 400) << body;
    EXPECT_FALSE(r.error().message.empty()) << body;
  }
}

TEST(ParserRobustness, MutatedBodiesGetAValueOrA400) {
  std::mt19937 rng(20261129);
  for (int i = 0; i < 4000; ++i) {
    const std::string body = Mutate(kSeeds[static_cast<std::size_t>(i) % kSeeds.size()], rng);
    ExpectValueOr400(ParseCompletionRequest(body), body);
    ExpectValueOr400(ParseChatCompletionRequest(body), body);
    ExpectValueOr400(ParseTokenizeRequest(body), body);
    ExpectValueOr400(ParseDetokenizeRequest(body), body);
    ExpectValueOr400(ParseAnthropicRequest(body), body);
  }
}

// Builds a random but well-formed SSE stream with mixed line endings and comments.
std::string RandomStream(std::mt19937& rng) {
  static const std::array<std::string_view, 3> kEol = {"\n", "\r\n", "\r"};
  auto eol = [&] { return std::string(kEol[std::uniform_int_distribution<int>(0, 2)(rng)]); };
  std::string s;
  const int events = std::uniform_int_distribution<int>(0, 20)(rng);
  for (int e = 0; e < events; ++e) {
    if (rng() % 4 == 0) s += ": comment" + eol();
    if (rng() % 3 == 0) s += "event: e" + std::to_string(e) + eol();
    const int lines = std::uniform_int_distribution<int>(0, 3)(rng);
    for (int l = 0; l < lines; ++l) {
      s += (rng() % 2 ? "data: " : "data:") + std::string(rng() % 10, 'x') + eol();
    }
    s += eol();
  }
  return s;
}

TEST(ParserRobustness, SseRandomStreamsParseTheSameInAnySplit) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const std::string stream = RandomStream(rng);
    SseParser whole_parser;
    std::vector<SseMessage> whole;
    ASSERT_TRUE(whole_parser.Feed(stream, whole));
    SseParser split_parser;
    std::vector<SseMessage> split;
    for (std::size_t pos = 0; pos < stream.size();) {
      const std::size_t n = std::min<std::size_t>(1 + rng() % 7, stream.size() - pos);
      ASSERT_TRUE(split_parser.Feed(std::string_view(stream).substr(pos, n), split));
      pos += n;
    }
    ASSERT_EQ(split, whole) << "trial " << trial;
  }
}

TEST(ParserRobustness, SseRandomBytesNeverExceedTheBound) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    SseParser parser(64);
    std::vector<SseMessage> out;
    std::string bytes(static_cast<std::size_t>(rng() % 512), '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 256);
    auto r = parser.Feed(bytes, out);
    for (const auto& m : out) EXPECT_LE(m.data.size(), 64u);
    if (!r) {
      EXPECT_FALSE(parser.Feed("data: x\n\n", out));
    }
  }
}

}  // namespace
}  // namespace kvroute::api
