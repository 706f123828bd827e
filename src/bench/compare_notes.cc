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

std::string CompareRunNotes(const std::vector<workload::RunReport>& runs, const RunnerOptions& run) {
  std::string text;
  if (run.duration_s > 0) {
    text += "Each level had " + ShortNumber(run.duration_s) + " s of wall time";
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
        if (full && level.requests.size() < *full) ++capped;
      }
    }
    if (run.workload == "agentic" && levels > 0) {
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
    for (const workload::LevelResult& level : r.levels) n += level.requests.size();
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
