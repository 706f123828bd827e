// Plots of one `kvroute bench run` with gnuplot: data files (whitespace-separated columns)
// plus one gnuplot script that renders every chart as PNG and SVG:
//   <stem>_throughput  throughput (input/output tokens/s) and Infera goodput per GPU vs
//                      concurrency (closed loop) or offered rate (open loop)
//   <stem>_ttft_cdf    TTFT CDF, one curve per level
//   <stem>_itl_cdf     inter-token latency CDF, one curve per level
//   <stem>_hit_rate    engine prefix-cache hit rate per level
// The script is kept next to the images so a chart can be restyled and re-rendered by hand.
//
// Thread safety: MakePlotFiles is pure; WritePlots runs gnuplot as a child process.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "workload/report.h"

namespace kvroute::bench {

struct PlotFile {
  std::string name;  // file name inside the output folder
  std::string content;
};

// Data files and the script (last element, "<stem>_plots.gp"). `png_terminal` is
// "pngcairo" when gnuplot has it, else "png". CDFs keep at most `max_cdf_points` per level.
std::vector<PlotFile> MakePlotFiles(const workload::RunReport& run, std::string_view png_terminal,
                                    std::size_t max_cdf_points = 2000);

// "pngcairo" if the installed gnuplot offers it, "png" otherwise, empty without gnuplot.
std::string DetectPngTerminal();

// Writes the files into `dir` and runs gnuplot there. Error text when gnuplot is missing or
// fails (the data files and script are written regardless).
std::expected<void, std::string> WritePlots(const workload::RunReport& run, const std::string& dir);

}  // namespace kvroute::bench
