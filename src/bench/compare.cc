#include "bench/compare.h"

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/plot.h"
#include "bench/time_base.h"

// GCC 12 reports std::optional<double> values built from a ternary with std::nullopt as
// maybe-uninitialized when inlined into Fixed() (a known false positive, GCC PR 105593 family).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace kvroute::bench {
namespace {

std::string Fixed(std::optional<double> v, int precision) {
  if (!v.has_value()) return "-";
  char buf[64];
  // value_or, not *v: GCC 12 flags *v here as maybe-uninitialized (a false positive).
  std::snprintf(buf, sizeof(buf), "%.*f", precision, v.value_or(0.0));
  return buf;
}

std::string Ms(double seconds) { return Fixed(seconds * 1000.0, 1); }

boost::json::value OrNull(std::optional<double> v) {
  return v.has_value() ? boost::json::value(v.value_or(0.0)) : boost::json::value(nullptr);
}

std::optional<double> Ratio(std::optional<double> a, std::optional<double> b) {
  if (!a.has_value() || !b.has_value() || b.value_or(0.0) <= 0) return std::nullopt;
  return a.value_or(0.0) / b.value_or(1.0);
}

boost::json::object SummaryJson(const Summary& s) {
  return {{"count", s.count}, {"p50", s.p50}, {"p99", s.p99}, {"mean", s.mean}};
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

CompareRow CompareRowOf(const RunReport& run) {
  CompareRow row;
  row.router = run.label;
  std::vector<double> ttft, itl;
  double hit_sum = 0, ext_sum = 0, duration = 0;
  int hit_levels = 0, ext_levels = 0;
  std::uint64_t output_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
  for (const auto& level : run.levels) {
    for (const auto& r : level.requests) {
      ++row.sent;
      if (!r.result.ok) {
        ++row.failed;
        continue;
      }
      ++row.ok;
      prompt_tokens += r.result.prompt_tokens;
      cached_tokens += r.result.cached_tokens;
      ttft.push_back(r.result.ttft_s);
      itl.insert(itl.end(), r.result.itl_s.begin(), r.result.itl_s.end());
      output_tokens += r.result.output_tokens;
    }
    duration += level.duration_s;
    if (level.hit_rate) {
      hit_sum += *level.hit_rate;
      ++hit_levels;
    }
    if (level.external_hit_rate) {
      ext_sum += *level.external_hit_rate;
      ++ext_levels;
    }
  }
  row.ttft = Summarize(ttft);
  row.itl = Summarize(itl);
  if (prompt_tokens > 0) {
    row.cached_fraction = static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens);
  }
  if (hit_levels > 0) row.hit_rate = hit_sum / hit_levels;
  if (ext_levels > 0) row.external_hit_rate = ext_sum / ext_levels;
  if (run.sweep_stop) row.stopped_after = run.sweep_stop->after_level;
  if (duration > 0) row.output_tokens_per_s = static_cast<double>(output_tokens) / duration;
  row.targets_tps = run.itl_targets_tps;
  const auto infera = InferaGoodputs(run);
  for (std::size_t i = 0; i < run.itl_targets_tps.size(); ++i) {
    row.goodput.push_back(i < infera.size() ? infera[i].tokens_per_s_per_gpu : std::nullopt);
    row.goodput_at.push_back(i < infera.size() ? infera[i].at_concurrency : std::nullopt);
  }
  return row;
}

void FillRatios(std::vector<CompareRow>& rows, const std::string& baseline) {
  const CompareRow* base = nullptr;
  for (const auto& r : rows) {
    if (r.router == baseline) base = &r;
  }
  // Copies: `base` points into `rows`, which the loop rewrites.
  const std::vector<std::optional<double>> base_goodput =
      base ? base->goodput : std::vector<std::optional<double>>{};
  const std::optional<double> base_tput =
      base ? std::optional<double>(base->output_tokens_per_s) : std::nullopt;
  for (auto& r : rows) {
    r.goodput_ratio.assign(r.goodput.size(), std::nullopt);
    for (std::size_t i = 0; i < r.goodput.size() && i < base_goodput.size(); ++i) {
      r.goodput_ratio[i] = Ratio(r.goodput[i], base_goodput[i]);
    }
    r.throughput_ratio = Ratio(r.output_tokens_per_s, base_tput);
  }
}

std::string CompareTable(const std::vector<CompareRow>& rows, const CompareMeta& meta) {
  std::ostringstream out;
  char line[512];
  std::vector<double> targets = rows.empty() ? std::vector<double>{} : rows.front().targets_tps;
  std::snprintf(line, sizeof(line), "%-28s %7s %6s", "router", "ok", "fail");
  out << line;
  for (double t : targets) {
    std::snprintf(line, sizeof(line), " %10s %5s %7s", ("gp@" + Fixed(t, 0)).c_str(), "at c",
                  "ratio");
    out << line;
  }
  std::snprintf(line, sizeof(line), " %9s %7s %9s %9s %8s %8s %6s %6s %s\n", "out tok/s", "ratio",
                "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "cached", "cpu", "stop");
  out << line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof(line), "%-28s %7zu %6zu", r.router.c_str(), r.ok, r.failed);
    out << line;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const auto g = i < r.goodput.size() ? r.goodput[i] : std::nullopt;
      const auto q = i < r.goodput_ratio.size() ? r.goodput_ratio[i] : std::nullopt;
      const auto at = i < r.goodput_at.size() ? r.goodput_at[i] : std::nullopt;
      std::snprintf(line, sizeof(line), " %10s %5s %7s", Fixed(g, 1).c_str(),
                    at ? std::to_string(*at).c_str() : "-", Fixed(q, 2).c_str());
      out << line;
    }
    std::snprintf(line, sizeof(line), " %9s %7s %9s %9s %8s %8s %6s %6s %s\n",
                  Fixed(r.output_tokens_per_s, 1).c_str(), Fixed(r.throughput_ratio, 2).c_str(),
                  Ms(r.ttft.p50).c_str(), Ms(r.ttft.p99).c_str(), Ms(r.itl.p50).c_str(),
                  Ms(r.itl.p99).c_str(), Fixed(r.cached_fraction, 3).c_str(),
                  Fixed(r.external_hit_rate, 3).c_str(),
                  r.stopped_after.empty() ? "-" : r.stopped_after.c_str());
    out << line;
  }
  out << "goodput gp@T: Infera tokens/s/GPU at T tokens/s/user; ratios vs " << meta.baseline
      << " (at c: the concurrency it was taken at); latencies in ms, pooled over levels; cached: "
         "prompt tokens served from cache (the clients' usage.cached_tokens; the engine's hit "
         "rate is in the files), cpu: CPU-tier hits (null without a tier); stop: the "
         "level after which the stop rule ended the sweep; "
      << TimeBaseNote(meta.speedup) << ".\n";
  if (meta.speedup != 1) {
    out << "note: routers and the client run in real time, so every real millisecond a proxy "
           "adds counts as "
        << meta.speedup
        << " model milliseconds: router overhead (nginx's and kvroute's alike) is magnified "
        << meta.speedup << "x relative to the engine's work.\n";
  }
  return out.str();
}

std::string CompareJson(const std::vector<CompareRow>& rows, const CompareMeta& meta) {
  boost::json::object doc;
  doc["schema"] = "kvroute.bench.compare/1";
  doc["baseline"] = meta.baseline;
  doc["speedup"] = meta.speedup;
  doc["time_base"] = TimeBaseNote(meta.speedup);
  doc["workers"] = meta.workers;
  doc["workload"] = meta.workload;
  boost::json::array routers;
  for (const auto& r : rows) {
    boost::json::object o;
    o["router"] = r.router;
    o["requests"] = {{"sent", r.sent}, {"ok", r.ok}, {"failed", r.failed}};
    boost::json::array goodput;
    for (std::size_t i = 0; i < r.targets_tps.size(); ++i) {
      goodput.push_back(
          {{"target_tokens_per_s_per_user", r.targets_tps[i]},
           {"tokens_per_s_per_gpu", OrNull(i < r.goodput.size() ? r.goodput[i] : std::nullopt)},
           {"ratio", OrNull(i < r.goodput_ratio.size() ? r.goodput_ratio[i] : std::nullopt)},
           {"at_concurrency", i < r.goodput_at.size() && r.goodput_at[i]
                                  ? boost::json::value(*r.goodput_at[i])
                                  : boost::json::value(nullptr)}});
    }
    o["goodput"] = std::move(goodput);
    o["output_tokens_per_s"] = r.output_tokens_per_s;
    o["throughput_ratio"] = OrNull(r.throughput_ratio);
    o["ttft_s"] = SummaryJson(r.ttft);
    o["itl_s"] = SummaryJson(r.itl);
    o["cached_fraction"] = OrNull(r.cached_fraction);
    o["hit_rate"] = OrNull(r.hit_rate);
    o["external_hit_rate"] = OrNull(r.external_hit_rate);
    o["stopped_after"] =
        r.stopped_after.empty() ? boost::json::value(nullptr) : boost::json::value(r.stopped_after);
    routers.push_back(std::move(o));
  }
  doc["routers"] = std::move(routers);
  return boost::json::serialize(doc) + "\n";
}

std::string CompareCsv(const std::vector<CompareRow>& rows) {
  std::ostringstream out;
  out << "router,sent,ok,failed";
  const std::vector<double> targets =
      rows.empty() ? std::vector<double>{} : rows.front().targets_tps;
  for (double t : targets) {
    out << ",goodput_at_" << t << ",goodput_ratio_at_" << t << ",goodput_concurrency_at_" << t;
  }
  out << ",output_tokens_per_s,throughput_ratio,ttft_p50_s,ttft_p99_s,itl_p50_s,itl_p99_s,"
         "hit_rate,external_hit_rate,stopped_after\n";
  auto cell = [](std::optional<double> v) { return v.has_value() ? Fixed(v, 6) : std::string(); };
  for (const auto& r : rows) {
    out << r.router << ',' << r.sent << ',' << r.ok << ',' << r.failed;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      out << ',' << cell(i < r.goodput.size() ? r.goodput[i] : std::nullopt) << ','
          << cell(i < r.goodput_ratio.size() ? r.goodput_ratio[i] : std::nullopt) << ','
          << (i < r.goodput_at.size() && r.goodput_at[i] ? std::to_string(*r.goodput_at[i])
                                                         : std::string());
    }
    out << ',' << cell(r.output_tokens_per_s) << ',' << cell(r.throughput_ratio) << ','
        << cell(r.ttft.p50) << ',' << cell(r.ttft.p99) << ',' << cell(r.itl.p50) << ','
        << cell(r.itl.p99) << ',' << cell(r.hit_rate) << ',' << cell(r.external_hit_rate) << ','
        << r.stopped_after << '\n';
  }
  return out.str();
}

std::vector<std::pair<std::string, std::string>> CompareChartFiles(
    const std::vector<CompareRow>& rows, const std::string& png_terminal) {
  std::ostringstream data;
  data << "# router goodput_first_target output_tokens_per_s (missing goodput: 0)\n";
  for (const auto& r : rows) {
    const double g = r.goodput.empty() ? 0.0 : r.goodput[0].value_or(0.0);
    data << '"' << r.router << "\" " << g << ' ' << r.output_tokens_per_s << '\n';
  }
  const std::string target = rows.empty() || rows.front().targets_tps.empty()
                                 ? "?"
                                 : Fixed(rows.front().targets_tps[0], 0);
  std::ostringstream gp;
  gp << "# Renders compare.png and compare.svg: gnuplot compare.gp\n"
     << "set style data histograms\nset style histogram clustered gap 1\n"
     << "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset xtics rotate by -30\n"
     << "set key top left\nset grid ytics\nset ylabel 'tokens/s'\n"
     << "set title 'Router comparison: goodput at " << target
     << " tok/s/user (per GPU) and output throughput'\n";
  const std::string plot =
      "plot 'compare_goodput.dat' using 2:xtic(1) title 'goodput/GPU', '' using 3 title "
      "'output tok/s'\n";
  // noenhanced: router names such as kvroute:llmd_sticky hold '_', which enhanced text
  // would render as a subscript.
  gp << "set terminal " << png_terminal << " size 1100,600 noenhanced\nset output 'compare.png'\n"
     << plot << "set terminal svg size 1100,600 noenhanced\nset output 'compare.svg'\n"
     << plot;
  return {{"compare_goodput.dat", data.str()}, {"compare.gp", gp.str()}};
}

std::expected<void, std::string> WriteCompareFiles(const std::vector<CompareRow>& rows,
                                                   const CompareMeta& meta, const std::string& dir,
                                                   bool plots, std::string* plot_error) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return std::unexpected("cannot create " + dir + ": " + ec.message());
  const std::string terminal = plots ? DetectPngTerminal() : std::string("png");
  std::vector<std::pair<std::string, std::string>> files = {
      {"compare.json", CompareJson(rows, meta)}, {"compare.csv", CompareCsv(rows)}};
  for (auto& f : CompareChartFiles(rows, terminal.empty() ? "png" : terminal)) {
    files.push_back(std::move(f));
  }
  for (const auto& [name, content] : files) {
    std::ofstream out(dir + "/" + name);
    out << content;
    if (!out) return std::unexpected("cannot write " + dir + "/" + name);
  }
  if (!plots) return {};
  if (terminal.empty()) {
    if (plot_error) *plot_error = "gnuplot not found: chart not rendered";
    return {};
  }
  const std::string cmd = "cd " + ShellQuote(dir) + " && gnuplot compare.gp >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0 && plot_error) *plot_error = "gnuplot failed on compare.gp";
  return {};
}

}  // namespace kvroute::bench
