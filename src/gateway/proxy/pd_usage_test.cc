// The usage merge of a split request (pd_usage.h): llm-d's rule, cached_tokens from the
// prefill leg, in a buffered answer and in the final usage chunk of a stream cut anywhere.
#include "gateway/proxy/pd_usage.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvroute::gateway {
namespace {

std::uint64_t CachedIn(std::string_view json) {
  return boost::json::parse(json)
      .at("usage")
      .at("prompt_tokens_details")
      .at("cached_tokens")
      .to_number<std::uint64_t>();
}

TEST(PdUsage, CachedTokensOfThePrefillAnswer) {
  EXPECT_EQ(CachedTokensOf(R"({"usage":{"prompt_tokens":90,"completion_tokens":1,
      "prompt_tokens_details":{"cached_tokens":64}}})"),
            64u);
  // Usage without details: nothing was cached as far as it says.
  EXPECT_EQ(CachedTokensOf(R"({"usage":{"prompt_tokens":90,"completion_tokens":1}})"), 0u);
  EXPECT_EQ(CachedTokensOf(R"({"choices":[]})"), std::nullopt);
  EXPECT_EQ(CachedTokensOf("not json"), std::nullopt);
}

TEST(PdUsage, BufferedAnswerGetsThePrefillLegsCachedTokens) {
  const std::string decode =
      R"({"id":"x","choices":[{"text":"hi"}],"usage":{"prompt_tokens":90,)"
      R"("completion_tokens":12,"prompt_tokens_details":{"cached_tokens":89}}})";
  const std::string merged = MergePrefillUsage(decode, 64);
  EXPECT_EQ(CachedIn(merged), 64u);
  auto v = boost::json::parse(merged);
  EXPECT_EQ(v.at("usage").at("prompt_tokens").as_int64(), 90);
  EXPECT_EQ(v.at("usage").at("completion_tokens").as_int64(), 12);
  EXPECT_EQ(v.at("choices").as_array().size(), 1u);
}

TEST(PdUsage, BufferedAnswerWithoutDetailsGetsThem) {
  EXPECT_EQ(CachedIn(MergePrefillUsage(R"({"usage":{"prompt_tokens":9}})", 3)), 3u);
}

TEST(PdUsage, AnswerWithoutUsageIsUnchanged) {
  const std::string body = R"({"error":{"message":"no"}})";
  EXPECT_EQ(MergePrefillUsage(body, 5), body);
  EXPECT_EQ(MergePrefillUsage("not json", 5), "not json");
}

const char kStream[] =
    "data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n"
    "data: {\"choices\":[{\"text\":\"b\"}],\"usage\":null}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":90,\"completion_tokens\":2,"
    "\"prompt_tokens_details\":{\"cached_tokens\":89}}}\n\n"
    "data: [DONE]\n\n";

// Feeds `text` cut every `step` bytes; returns what the rewriter let through.
std::string FeedInPieces(std::string_view text, std::size_t step) {
  SseUsageRewriter rw(64);
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += step) out += rw.Feed(text.substr(i, step));
  out += rw.Finish();
  return out;
}

TEST(PdUsage, StreamUsageChunkRewrittenWherePiecesAreCut) {
  for (std::size_t step : {std::size_t{1}, std::size_t{7}, std::size_t{50}, sizeof kStream}) {
    const std::string out = FeedInPieces(kStream, step);
    // Token events and [DONE] unchanged, in order; only the usage chunk differs.
    EXPECT_EQ(out.find("data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n"), 0u) << step;
    EXPECT_NE(out.find("data: {\"choices\":[{\"text\":\"b\"}],\"usage\":null}\n\n"),
              std::string::npos);
    EXPECT_EQ(out.rfind("data: [DONE]\n\n"), out.size() - 14) << step;
    const std::size_t at = out.find("data: {\"choices\":[],");
    ASSERT_NE(at, std::string::npos) << step;
    const std::size_t end = out.find("\n\n", at);
    EXPECT_EQ(CachedIn(out.substr(at + 6, end - at - 6)), 64u) << step;
  }
}

TEST(PdUsage, IncompleteEventIsHeldUntilItEnds) {
  SseUsageRewriter rw(1);
  EXPECT_EQ(rw.Feed("data: {\"choices\":[{\"text\":\"a\"}]}"), "");
  EXPECT_EQ(rw.Feed("\n\ndata: {\"cho"), "data: {\"choices\":[{\"text\":\"a\"}]}\n\n");
  EXPECT_EQ(rw.Finish(), "data: {\"cho");
}

}  // namespace
}  // namespace kvroute::gateway
