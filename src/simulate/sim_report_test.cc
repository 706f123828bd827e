#include "simulate/sim_report.h"

#include <gtest/gtest.h>

namespace kvroute::simulate {
namespace {

// A one-level report: `ok` requests that succeeded, then one failure per kind listed.
workload::RunReport Report(int ok, const std::vector<std::string>& failures,
                        std::string workload = "agentic") {
  workload::RunReport report;
  report.workload = std::move(workload);
  workload::LevelResult level;
  level.name = "c=8";
  for (int i = 0; i < ok; ++i) level.requests.push_back({.result = {.ok = true}});
  for (const auto& kind : failures) {
    level.requests.push_back({.result = {.ok = false, .error_kind = kind}});
  }
  report.levels.push_back(std::move(level));
  return report;
}

std::vector<SimLevelExtras> Rejected(std::uint64_t n, std::string reason) {
  SimLevelExtras x;
  x.level = "c=8";
  x.rejected = n;
  x.first_rejection = std::move(reason);
  return {x};
}

TEST(FailureNoteTest, NothingToSayWhenEveryRequestSucceeded) {
  EXPECT_FALSE(FailureNote(Report(5, {}), Rejected(0, "")).has_value());
}

TEST(FailureNoteTest, MostRequestsFailingIsAWarningNamingTheKindAndTheLimit) {
  auto note = FailureNote(
      Report(1, {"http_4xx", "http_4xx", "stream"}),
      Rejected(2, "prompt (40892 tokens) + max_tokens (900) exceeds max_model_len 40960"));
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(note->rfind("WARNING: 3 of 4 requests failed (http_4xx 2, stream 1): the engines "
                        "refused 2 requests longer than max_model_len 40960 (first: prompt",
                        0),
            0u)
      << *note;
  EXPECT_NE(note->find("--turns"), std::string::npos) << *note;
  EXPECT_NE(note->find("--max-model-len"), std::string::npos) << *note;
  EXPECT_NE(note->find("only the requests that succeeded"), std::string::npos) << *note;
}

TEST(FailureNoteTest, AFewFailuresAreANote) {
  auto note = FailureNote(
      Report(9, {"http_4xx"}, "trace"),
      Rejected(1, "prompt (42608 tokens) + max_tokens (7) exceeds max_model_len 40960"));
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(note->rfind("note: 1 of 10 requests failed (http_4xx 1)", 0), 0u) << *note;
  EXPECT_NE(note->find("Raise --max-model-len"), std::string::npos) << *note;
  EXPECT_EQ(note->find("--turns"), std::string::npos) << *note;  // not an agentic run
}

TEST(FailureNoteTest, FailuresWithoutARefusalNameOnlyTheirKinds) {
  auto note = FailureNote(Report(1, {"connect", "connect", "stream"}), Rejected(0, ""));
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(*note,
            "WARNING: 3 of 4 requests failed (connect 2, stream 1). Latency and goodput "
            "describe only the requests that succeeded.");
}

}  // namespace
}  // namespace kvroute::simulate
