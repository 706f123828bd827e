#include "bench/compare_notes.h"

#include <gtest/gtest.h>

namespace kvroute::bench {
namespace {

// A router's run of one agentic level at concurrency `c` with `n` requests.
workload::RunReport RouterRun(const std::string& label, int c, int n) {
  workload::RunReport run;
  run.label = label;
  run.workload = "agentic";
  workload::LevelResult level;
  level.name = "c=" + std::to_string(c);
  level.concurrency = c;
  level.requests.resize(static_cast<std::size_t>(n));
  run.levels.push_back(level);
  return run;
}

// The demo's workload: one session per user, 30 turns, 50 s per level at speedup 10.
RunnerOptions Demo() {
  RunnerOptions r;
  r.workload = "agentic";
  r.agentic.sessions = 0;
  r.agentic.turns = 30;
  r.duration_s = 50;
  r.time_scale = 10;
  return r;
}

std::string Flat(std::string s) {
  for (char& c : s) c = c == '\n' ? ' ' : c;
  return s;
}

TEST(WrapTextTest, LinesStayWithinTheWidthAndKeepEveryWord) {
  const std::string text = WrapText("aaa bbb ccc ddd eee", 7);
  EXPECT_EQ(text, "aaa bbb\nccc ddd\neee\n");
  EXPECT_EQ(WrapText("abcdefghij k", 4), "abcdefghij\nk\n");  // a long word gets its own line
  EXPECT_EQ(WrapText(""), "");
}

TEST(CompareRunNotesTest, TheDemoSaysTheLevelsEndedAtTheCapAndWhyCountsDiffer) {
  const std::string notes = CompareRunNotes(
      {RouterRun("nginx-rr", 16, 254), RouterRun("kvroute:predicted_latency", 16, 318)}, Demo());
  for (std::size_t at = 0, nl; (nl = notes.find('\n', at)) != std::string::npos; at = nl + 1) {
    EXPECT_LE(nl - at, 100u);
  }
  const std::string flat = Flat(notes);
  EXPECT_NE(flat.find("50 s of wall time, 500 model seconds at --speedup 10"), std::string::npos)
      << notes;
  EXPECT_NE(flat.find("Every level here ended at the cap, before its sessions had run their 30 "
                      "turns."),
            std::string::npos)
      << notes;
  EXPECT_NE(flat.find("closed loop"), std::string::npos) << notes;
  // Most requests first.
  EXPECT_NE(flat.find("kvroute:predicted_latency 318, nginx-rr 254."), std::string::npos) << notes;
}

TEST(CompareRunNotesTest, ALevelThatRanEveryTurnIsNotCalledCapped) {
  const std::string notes =
      Flat(CompareRunNotes({RouterRun("a", 2, 60), RouterRun("b", 2, 60)}, Demo()));
  EXPECT_NE(notes.find("Every level here ran its sessions' 30 turns before the cap."),
            std::string::npos)
      << notes;
  EXPECT_EQ(notes.find("closed loop"), std::string::npos) << notes;  // same counts
}

// --warmup-step --early-stop: the notes say how the levels were measured, count only the
// measured requests, and call no level capped (the early stop ends levels short by design).
TEST(CompareRunNotesTest, InferasProcedureIsNamedAndItsWarmupsAreNotCounted) {
  RunnerOptions r = Demo();
  r.procedure = {.warmup_step = true, .early_stop = true};
  workload::RunReport a = RouterRun("a", 2, 40), b = RouterRun("b", 2, 36);
  a.levels[0].requests[0].warmup = a.levels[0].requests[1].warmup = true;
  const std::string notes = Flat(CompareRunNotes({a, b}, r));
  EXPECT_NE(notes.find("Measured as Infera's sweep"), std::string::npos) << notes;
  EXPECT_NE(notes.find("first turn was a warm-up"), std::string::npos) << notes;
  EXPECT_NE(notes.find("ran out of sessions (--early-stop)."), std::string::npos) << notes;
  EXPECT_EQ(notes.find("ended at the cap"), std::string::npos) << notes;
  EXPECT_NE(notes.find("a 38, b 36."), std::string::npos) << notes;  // a's 2 warm-ups left out
}

TEST(CompareRunNotesTest, NothingToSayWithoutACapOrADifference) {
  RunnerOptions r = Demo();
  r.duration_s = 0;
  EXPECT_EQ(CompareRunNotes({RouterRun("a", 2, 60), RouterRun("b", 2, 60)}, r), "");
}

TEST(CompareRunNotesTest, UncappedSizeCountsAtLeastOneSessionPerUser) {
  RunnerOptions r = Demo();
  EXPECT_EQ(UncappedLevelRequests(r, 16), 16u * 30u);
  r.agentic.sessions = 64;
  EXPECT_EQ(UncappedLevelRequests(r, 16), 64u * 30u);
  r.workload = "trace";
  EXPECT_FALSE(UncappedLevelRequests(r, 0).has_value());
}

}  // namespace
}  // namespace kvroute::bench
