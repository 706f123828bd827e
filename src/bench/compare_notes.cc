#include "bench/compare_notes.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <utility>

#include "common/format.h"

namespace kvroute::bench {

std::string WrapText(std::string_view text, std::size_t width) {
  std::string out, line;
  std::istringstream words{std::string(text)};
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + '\n';
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += line + '\n';
  return out;
}

std::optional<std::size_t> UncappedLevelRequests(const RunnerOptions& run, int concurrency) {
  if (run.workload != "agentic") return std::nullopt;
  const int sessions = std::max(run.agentic.sessions, concurrency);
  return static_cast<std::size_t>(std::max(sessions, 0)) *
         static_cast<std::size_t>(std::max(run.agentic.turns, 0));
}

namespace {

std::size_t MeasuredRequests(const workload::LevelResult& level) {
  return static_cast<std::size_t>(std::ranges::count_if(
      level.requests, [](const workload::RequestRecord& r) { return !r.warmup; }));
}

}  // namespace

std::string CompareRunNotes(const std::vector<workload::RunReport>& runs, const RunnerOptions& run) {
  std::string text;
  if (run.workload == "agentic" && run.procedure.any()) {
    text += "Measured as Infera's sweep (vLLM's multi-turn tool):";
    if (run.procedure.warmup_step) {
      text += " every session's first turn was a warm-up, sent first and not counted;";
    }
    if (run.procedure.early_stop) {
      text += " each level ended when its first client ran out of sessions (--early-stop);";
    }
    text.back() = '.';
  }
  if (run.duration_s > 0) {
    text += std::string(text.empty() ? "" : " ") + "Each level had " +
            ShortNumber(run.duration_s) + " s of wall time";
    if (run.time_scale != 1) {
      text += ", " + ShortNumber(run.duration_s * run.time_scale) + " model seconds at --speedup " +
              ShortNumber(run.time_scale);
    }
    text += ": at that cap it stops starting requests and lets those in flight finish.";
    std::size_t levels = 0, capped = 0;
    for (const workload::RunReport& r : runs) {
      for (const workload::LevelResult& level : r.levels) {
        ++levels;
        const auto full = UncappedLevelRequests(run, level.concurrency);
        if (full && level.requests.size() < *full) ++capped;  // warm-ups count: they were sent
      }
    }
    // With --early-stop a level ends short of its sessions' turns by design: which levels the
    // cap ended is then not known from the counts.
    if (run.workload == "agentic" && levels > 0 && !run.procedure.early_stop) {
      const std::string whole = std::to_string(run.agentic.turns) + " turns";
      if (capped == levels) {
        text +=
            " Every level here ended at the cap, before its sessions had run their " + whole + ".";
      } else if (capped == 0) {
        text += " Every level here ran its sessions' " + whole + " before the cap.";
      } else {
        text += " " + std::to_string(capped) + " of the " + std::to_string(levels) +
                " levels ended at the cap, the others ran their sessions' " + whole + ".";
      }
    }
  }
  std::vector<std::pair<std::size_t, std::string>> sent;
  for (const workload::RunReport& r : runs) {
    std::size_t n = 0;
    for (const workload::LevelResult& level : r.levels) n += MeasuredRequests(level);
    sent.emplace_back(n, r.label);
  }
  const bool differ = std::ranges::adjacent_find(sent, [](const auto& a, const auto& b) {
                        return a.first != b.first;
                      }) != sent.end();
  if (differ && run.workload == "agentic") {
    std::ranges::stable_sort(sent, std::greater<>{}, &std::pair<std::size_t, std::string>::first);
    text += std::string(text.empty() ? "" : " ") +
            "The sessions are a closed loop (a session sends its next turn when the previous "
            "answer is complete), so in the same time a router that answers sooner serves more "
            "requests:";
    for (std::size_t i = 0; i < sent.size(); ++i) {
      text += (i ? ", " : " ") + sent[i].second + " " + std::to_string(sent[i].first);
    }
    text += ".";
  } else if (differ) {
    text += std::string(text.empty() ? "" : " ") +
            "The routers sent different numbers of requests: the cap ended each level at a "
            "different point of the workload.";
  }
  return text.empty() ? std::string() : WrapText(text);
}

}  // namespace kvroute::bench
