#include "bench/plot.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvroute::bench {
namespace {

// Sorted samples → "value fraction" rows, thinned evenly to at most `max_points`.
std::string CdfRows(std::vector<double> samples, std::size_t max_points) {
  std::ostringstream out;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  if (n == 0) return "";
  const std::size_t step = std::max<std::size_t>(1, n / std::max<std::size_t>(1, max_points));
  for (std::size_t i = 0; i < n; i += step) {
    out << samples[i] << ' ' << static_cast<double>(i + 1) / static_cast<double>(n) << '\n';
  }
  if ((n - 1) % step != 0) out << samples[n - 1] << " 1\n";
  return out.str();
}

std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "''";
    else
      out += c;
  }
  return out + "'";
}

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace

std::vector<PlotFile> MakePlotFiles(const workload::RunReport& run, std::string_view png_terminal,
                                    std::size_t max_cdf_points) {
  const std::string stem = workload::FileStem(run.label);
  std::vector<PlotFile> files;
  const bool closed = std::any_of(run.levels.begin(), run.levels.end(),
                                  [](const workload::LevelResult& l) { return l.concurrency > 0; });
  const auto infera = workload::InferaGoodputs(run);

  // Throughput (and goodput) vs the level's x: concurrency or offered rate.
  std::ostringstream tput;
  tput << "# x input_tok_s output_tok_s total_tok_s_per_gpu hit_rate level\n";
  for (const workload::LevelResult& l : run.levels) {
    workload::LevelSummary s = workload::SummarizeLevel(l, run.slo);
    const double x = l.concurrency > 0 ? l.concurrency : l.rate_per_s;
    tput << x << ' ' << s.input_tokens_per_s << ' ' << s.output_tokens_per_s << ' '
         << (s.input_tokens_per_s + s.output_tokens_per_s) / std::max(1, run.gpus) << ' '
         << (l.hit_rate ? std::to_string(*l.hit_rate) : "NaN") << ' ' << l.name << '\n';
  }
  files.push_back({stem + "_throughput.dat", tput.str()});

  // CDFs: one data block per level (separated by two blank lines → gnuplot "index").
  std::ostringstream ttft, itl;
  for (const workload::LevelResult& l : run.levels) {
    std::vector<double> t, g;
    for (const workload::RequestRecord& r : l.requests) {
      if (!r.result.ok) continue;
      t.push_back(r.result.ttft_s);
      g.insert(g.end(), r.result.itl_s.begin(), r.result.itl_s.end());
    }
    ttft << "# " << l.name << '\n' << CdfRows(t, max_cdf_points) << "\n\n";
    itl << "# " << l.name << '\n' << CdfRows(g, max_cdf_points) << "\n\n";
  }
  files.push_back({stem + "_ttft_cdf.dat", ttft.str()});
  files.push_back({stem + "_itl_cdf.dat", itl.str()});

  // The script: each chart rendered twice, PNG then SVG.
  std::ostringstream gp;
  const std::string xlabel = closed ? "concurrent sessions" : "offered rate (req/s)";
  auto render = [&](const std::string& name, const std::string& body) {
    // noenhanced: labels are literal text (an '_' or '@' in a label is not markup).
    gp << "set terminal " << png_terminal << " size 960,600 noenhanced\n"
       << "set output " << Quote(stem + "_" + name + ".png") << "\n"
       << body << "set terminal svg size 960,600 dynamic noenhanced\n"
       << "set output " << Quote(stem + "_" + name + ".svg") << "\n"
       << "replot\nunset output\nreset\n";
  };
  gp << "# kvroute bench plots for run " << Quote(run.label) << " (" << run.workload
     << "). Re-render: gnuplot " << stem << "_plots.gp\n";
  std::ostringstream tp;
  tp << "set title " << Quote(run.label + ": throughput vs " + xlabel) << "\n"
     << "set xlabel " << Quote(xlabel) << "\nset ylabel 'tokens/s'\nset grid\nset key top left\n";
  tp << "plot " << Quote(stem + "_throughput.dat")
     << " using 1:2 with linespoints title 'input tok/s', '' using 1:3 with linespoints title "
        "'output tok/s', '' using 1:4 with linespoints title 'total tok/s per GPU'";
  for (std::size_t i = 0; i < infera.size() && i < run.itl_targets_tps.size(); ++i) {
    if (infera[i].tokens_per_s_per_gpu) {
      char title[96];
      std::snprintf(title, sizeof title, "goodput at %g tok/s/user", run.itl_targets_tps[i]);
      tp << ", " << *infera[i].tokens_per_s_per_gpu << " with lines dashtype 2 title "
         << Quote(title);
    }
  }
  tp << "\n";
  render("throughput", tp.str());

  auto cdf = [&](const std::string& data, const std::string& what) {
    std::ostringstream p;
    p << "set title " << Quote(run.label + ": " + what + " CDF") << "\nset xlabel "
      << Quote(what + " (s)") << "\nset ylabel 'fraction of samples'\nset grid\n"
      << "set key bottom right\nset yrange [0:1]\nplot ";
    for (std::size_t i = 0; i < run.levels.size(); ++i) {
      if (i > 0) p << ", ";
      p << Quote(data) << " index " << i << " using 1:2 with steps title "
        << Quote(run.levels[i].name);
    }
    if (run.levels.empty()) p << "NaN notitle";
    p << "\n";
    return p.str();
  };
  render("ttft_cdf", cdf(stem + "_ttft_cdf.dat", "TTFT"));
  render("itl_cdf", cdf(stem + "_itl_cdf.dat", "inter-token latency"));

  std::ostringstream hp;
  hp << "set title " << Quote(run.label + ": engine prefix-cache hit rate") << "\n"
     << "set ylabel 'hit rate'\nset yrange [0:1]\nset grid\nset style fill solid 0.6\n"
     << "set boxwidth 0.6\nplot " << Quote(stem + "_throughput.dat")
     << " using 0:5:xticlabels(6) with boxes notitle\n";
  render("hit_rate", hp.str());
  files.push_back({stem + "_plots.gp", gp.str()});
  return files;
}

std::string DetectPngTerminal() {
  // stdin closed: with a terminal as input gnuplot pages its list and waits for Enter.
  FILE* p = ::popen("gnuplot -e 'set terminal' </dev/null 2>&1", "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  if (rc != 0 || out.find("png") == std::string::npos) return "";
  return out.find("pngcairo") != std::string::npos ? "pngcairo" : "png";
}

std::expected<void, std::string> WritePlots(const workload::RunReport& run, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return std::unexpected("cannot create " + dir + ": " + ec.message());
  const std::string terminal = DetectPngTerminal();
  const auto files = MakePlotFiles(run, terminal.empty() ? "png" : terminal);
  for (const PlotFile& f : files) {
    std::ofstream out(dir + "/" + f.name, std::ios::binary | std::ios::trunc);
    out << f.content;
    if (!out) return std::unexpected("cannot write " + dir + "/" + f.name);
  }
  if (terminal.empty()) return std::unexpected("gnuplot not found: plots not rendered");
  const std::string cmd =
      "cd " + ShellQuote(dir) + " && gnuplot " + ShellQuote(files.back().name) +
      " </dev/null >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0)
    return std::unexpected("gnuplot failed on " + files.back().name);
  return {};
}

}  // namespace kvroute::bench
