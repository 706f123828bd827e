// The combined report of `kvroute bench compare`: one row per router (from that router's
// workload::RunReport), ratios against a baseline router (nginx round robin), and its outputs: a
// terminal table, compare.json, compare.csv and a gnuplot bar chart.
//
// A row pools the run's levels: latency percentiles over every ok request (ITL over every
// gap), hit rate as the mean of the levels' engine hit rates (per tier), goodput as the run's
// Infera goodput at each per-user speed target with the concurrency it was taken at. A ratio is row
// / baseline, absent (null) when either side is absent or the baseline is 0 — never a made-up
// number.
//
// Thread safety: pure functions, except WriteCompareFiles (files + a gnuplot child).
#pragma once

#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "workload/report.h"

namespace kvroute::bench {

struct CompareRow {
  std::string router;
  std::size_t sent = 0, ok = 0, failed = 0;
  std::vector<double> targets_tps;                   // Infera per-user speed targets
  std::vector<std::optional<double>> goodput;        // tokens/s/GPU at each target
  std::vector<std::optional<double>> goodput_ratio;  // vs the baseline, per target
  double output_tokens_per_s = 0;                    // summed over levels / summed durations
  std::optional<double> throughput_ratio;            // output tokens/s vs the baseline
  workload::Summary ttft, itl;
  std::optional<double> cached_fraction;       // prompt tokens served from cache (clients' usage)
  std::optional<double> hit_rate;              // engine prefix cache (vLLM: the GPU tier)
  std::optional<double> external_hit_rate;     // the lower (CPU) tier, when the engines export it
  std::vector<std::optional<int>> goodput_at;  // the concurrency each goodput was taken at
  std::string stopped_after;  // the level that ended the sweep (stop rule); empty: all ran
};

CompareRow CompareRowOf(const workload::RunReport& run);

// Fills the ratios of every row against the row named `baseline` (if present).
void FillRatios(std::vector<CompareRow>& rows, const std::string& baseline);

struct CompareMeta {
  std::string baseline = "nginx-rr";
  double speedup = 1;
  int workers = 0;
  std::string workload;
};

std::string CompareTable(const std::vector<CompareRow>& rows, const CompareMeta& meta);
std::string CompareJson(const std::vector<CompareRow>& rows, const CompareMeta& meta);
std::string CompareCsv(const std::vector<CompareRow>& rows);
// compare_goodput.dat + compare.gp (last): goodput at the first target and output
// throughput per router as bars.
std::vector<std::pair<std::string, std::string>> CompareChartFiles(
    const std::vector<CompareRow>& rows, const std::string& png_terminal);

// Writes compare.json, compare.csv and the chart files into `dir`, then runs gnuplot there
// unless `plots` is false. The error names what failed; gnuplot's failure is reported in
// `plot_error` instead (the data are still written).
std::expected<void, std::string> WriteCompareFiles(const std::vector<CompareRow>& rows,
                                                   const CompareMeta& meta, const std::string& dir,
                                                   bool plots, std::string* plot_error);

}  // namespace kvroute::bench
