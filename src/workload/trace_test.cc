#include "workload/trace.h"

#include <gtest/gtest.h>

#include <sstream>

#include "workload/trace_expand.h"

namespace kvroute::workload {
namespace {

// The public traces the project ships in data/ (PROVENANCE.md there; never edited in place).
std::string SharedData(const std::string& rel) { return std::string(KVROUTE_SOURCE_DIR) + "/data/" + rel; }

TEST(TraceTest, MooncakeSyntheticTraceLoadsWhole) {
  auto trace = LoadTrace(SharedData("mooncake/synthetic_trace.jsonl"));
  ASSERT_TRUE(trace.has_value()) << trace.error();
  ASSERT_EQ(trace->requests.size(), 3993u);  // PROVENANCE.md: 3,993 lines
  EXPECT_EQ(trace->hash_block_tokens, 512u);
  EXPECT_DOUBLE_EQ(trace->requests.front().arrival_s, 0);
  EXPECT_NEAR(trace->requests.back().arrival_s, 1022.025, 1e-9);  // 0 to 1,022,025 ms
  for (const auto& r : trace->requests) {
    EXPECT_EQ(r.hash_ids.size(), (r.input_tokens + 511) / 512);
  }
}

TEST(TraceTest, AzureTracesLoadWhole) {
  auto code = LoadTrace(SharedData("azure-llm-2023/AzureLLMInferenceTrace_code.csv"));
  ASSERT_TRUE(code.has_value()) << code.error();
  EXPECT_EQ(code->requests.size(), 8819u);
  auto conv = LoadTrace(SharedData("azure-llm-2023/AzureLLMInferenceTrace_conv.csv"));
  ASSERT_TRUE(conv.has_value()) << conv.error();
  EXPECT_EQ(conv->requests.size(), 19366u);
  // About one hour: 18:15 to 19:14.
  EXPECT_GT(conv->requests.back().arrival_s, 3000);
  EXPECT_LT(conv->requests.back().arrival_s, 3700);
}

TEST(TraceTest, MooncakeMalformedLinesNameTheLine) {
  struct Case {
    std::string text;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"{\"timestamp\":0,\"input_length\":10,\"output_length\":1,\"hash_ids\":[1]}\n{oops\n", "line 2: not valid JSON"},
      {"[1,2]\n", "line 1: expected a JSON object"},
      {"{\"timestamp\":-5,\"input_length\":10,\"output_length\":1,\"hash_ids\":[1]}\n", "line 1: timestamp"},
      {"{\"timestamp\":0,\"input_length\":\"x\",\"output_length\":1,\"hash_ids\":[1]}\n", "line 1: input_length"},
      {"{\"timestamp\":0,\"input_length\":10,\"hash_ids\":[1]}\n", "line 1: output_length"},
      {"{\"timestamp\":0,\"input_length\":10,\"output_length\":1,\"hash_ids\":[\"a\"]}\n", "line 1: hash_ids"},
      {"{\"timestamp\":0,\"input_length\":10,\"output_length\":1,\"hash_ids\":[1,2]}\n", "line 1: more hash_ids"},
  };
  for (const auto& c : cases) {
    std::istringstream in(c.text);
    auto r = ParseMooncakeJsonl(in);
    ASSERT_FALSE(r.has_value()) << c.text;
    EXPECT_EQ(r.error().rfind(c.expect, 0), 0u) << r.error();
  }
}

TEST(TraceTest, AzureMalformedRowsNameTheLine) {
  std::istringstream bad_header("a,b,c\n");
  EXPECT_FALSE(ParseAzureCsv(bad_header).has_value());
  std::istringstream bad_ts("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-13-01 00:00:00,1,2\n");
  auto r = ParseAzureCsv(bad_ts);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().rfind("line 2:", 0), 0u);
  std::istringstream bad_num("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.98,x,2\n");
  EXPECT_FALSE(ParseAzureCsv(bad_num).has_value());
  std::istringstream empty("");
  EXPECT_FALSE(ParseAzureCsv(empty).has_value());
}

TEST(TraceTest, AzureTimestampsKeepFractionsAndOrder) {
  std::istringstream in(
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
      "2023-11-16 18:17:04.5000000,10,2\r\n"
      "2023-11-16 18:17:03.2500000,20,3\r\n");
  auto r = ParseAzureCsv(in);
  ASSERT_TRUE(r.has_value()) << r.error();
  ASSERT_EQ(r->requests.size(), 2u);
  EXPECT_EQ(r->requests[0].input_tokens, 20u);  // sorted by time
  EXPECT_NEAR(r->requests[1].arrival_s, 1.25, 1e-9);
  EXPECT_NEAR(*ParseAzureTimestamp("1970-01-02 00:00:01"), 86401, 1e-9);
}

TEST(TraceExpandTest, EqualHashIdsGiveEqualPrefixes) {
  std::vector<TokenId> vocab = {100, 101, 102, 103, 104, 105, 106, 107};
  TraceRequest a{.input_tokens = 1200, .hash_ids = {7, 8, 9}};
  TraceRequest b{.input_tokens = 1100, .hash_ids = {7, 8, 10}};
  auto ta = ExpandPrompt(a, 512, vocab, {.unique_salt = 1});
  auto tb = ExpandPrompt(b, 512, vocab, {.unique_salt = 2});
  ASSERT_EQ(ta.size(), 1200u);
  ASSERT_EQ(tb.size(), 1100u);
  EXPECT_TRUE(std::equal(ta.begin(), ta.begin() + 1024, tb.begin()));
  EXPECT_FALSE(std::equal(ta.begin() + 1024, ta.begin() + 1100, tb.begin() + 1024));
  for (auto t : ta) EXPECT_TRUE(std::find(vocab.begin(), vocab.end(), t) != vocab.end());
}

TEST(TraceExpandTest, MultiplierScalesBlocks) {
  std::vector<TokenId> vocab = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  TraceRequest a{.input_tokens = 1024, .hash_ids = {1, 2}};
  TraceRequest b{.input_tokens = 1024, .hash_ids = {1, 3}};
  auto ta = ExpandPrompt(a, 512, vocab, {.prefix_multiplier = 2.0});
  auto tb = ExpandPrompt(b, 512, vocab, {.prefix_multiplier = 2.0});
  ASSERT_EQ(ta.size(), 2048u);
  EXPECT_TRUE(std::equal(ta.begin(), ta.begin() + 1024, tb.begin()));
  EXPECT_NE(std::vector<TokenId>(ta.begin() + 1024, ta.end()), std::vector<TokenId>(tb.begin() + 1024, tb.end()));
}

}  // namespace
}  // namespace kvroute::workload
