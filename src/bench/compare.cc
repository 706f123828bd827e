#include "bench/compare.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "bench/compare_notes.h"
#include "bench/plot.h"
#include "workload/time_base.h"

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

boost::json::value OrNull(std::optional<double> v) {
  return v.has_value() ? boost::json::value(v.value_or(0.0)) : boost::json::value(nullptr);
}

std::optional<double> Ratio(std::optional<double> a, std::optional<double> b) {
  if (!a.has_value() || !b.has_value() || b.value_or(0.0) <= 0) return std::nullopt;
  return a.value_or(0.0) / b.value_or(1.0);
}

boost::json::object SummaryJson(const workload::Summary& s) {
  return {{"count", s.count}, {"p50", s.p50}, {"p99", s.p99}, {"mean", s.mean}};
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

CompareRow CompareRowOf(const workload::RunReport& run) {
  CompareRow row;
  row.router = run.label;
  std::vector<double> ttft, itl;
  double hit_sum = 0, ext_sum = 0, duration = 0;
  int hit_levels = 0, ext_levels = 0;
  std::uint64_t output_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
  for (const auto& level : run.levels) {
    for (const auto& r : level.requests) {
      if (r.warmup) continue;  // --warmup-step: in the files, not in the comparison
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
  row.ttft = workload::Summarize(ttft);
  row.itl = workload::Summarize(itl);
  if (prompt_tokens > 0) {
    row.cached_fraction = static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens);
  }
  if (hit_levels > 0) row.hit_rate = hit_sum / hit_levels;
  if (ext_levels > 0) row.external_hit_rate = ext_sum / ext_levels;
  if (run.sweep_stop) row.stopped_after = run.sweep_stop->after_level;
  if (duration > 0) row.output_tokens_per_s = static_cast<double>(output_tokens) / duration;
  row.targets_tps = run.itl_targets_tps;
  const auto infera = workload::InferaGoodputs(run);
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

// Fits 100 columns for the demo (and for `bench compare`'s nine routers at one goodput
// target): a column no row has a value for is left out (a target nobody met, the CPU tier
// without one, the stop rule when nothing stopped), so is a goodput target whose every value
// repeats the previous one, and "at c" when every row shares one concurrency; numbers carry
// only the digits that tell routers apart. Every value stays in compare.json / compare.csv.
// The legend explains only the columns shown, wrapped at 100 columns.
std::string CompareTable(const std::vector<CompareRow>& rows, const CompareMeta& meta) {
  constexpr std::size_t kWidth = 100;
  const std::vector<double> targets =
      rows.empty() ? std::vector<double>{} : rows.front().targets_tps;
  auto any_row = [&rows](auto&& has) { return std::ranges::any_of(rows, has); };
  auto at = [](const auto& v, std::size_t i) {
    return i < v.size() ? v[i] : std::decay_t<decltype(v[0])>{};
  };
  // Milliseconds: whole ones from 100 up, one decimal below.
  auto ms = [](double seconds) {
    const double v = seconds * 1000.0;
    return Fixed(v, v >= 100 ? 0 : 1);
  };
  struct Column {
    std::string name;
    std::size_t width;
    std::function<std::string(const CompareRow&)> cell;
  };
  std::vector<Column> columns;
  columns.push_back({"ok", 5, [](const CompareRow& r) { return std::to_string(r.ok); }});
  columns.push_back({"fail", 4, [](const CompareRow& r) { return std::to_string(r.failed); }});
  std::vector<std::string> shown, same_as_previous;  // "gp@30", ...; "gp@50 = gp@30"
  std::optional<std::size_t> previous;
  std::string taken_at;  // the one concurrency every goodput was taken at, if they share one
  bool at_column = false;
  std::set<int> concurrencies;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (!any_row([&](const CompareRow& r) { return at(r.goodput, i).has_value(); })) continue;
    const std::string name = "gp@" + Fixed(targets[i], 0);
    if (previous && std::ranges::all_of(rows, [&](const CompareRow& r) {
          return at(r.goodput, i) == at(r.goodput, *previous);
        })) {
      same_as_previous.push_back(name + " = gp@" + Fixed(targets[*previous], 0));
      continue;
    }
    previous = i;
    shown.push_back(name);
    columns.push_back({name, 6, [&at, i](const CompareRow& r) {
                         const auto g = at(r.goodput, i);
                         return Fixed(g, g && *g < 100 ? 1 : 0);
                       }});
    columns.push_back(
        {"ratio", 5, [&at, i](const CompareRow& r) { return Fixed(at(r.goodput_ratio, i), 2); }});
    std::set<int> seen;
    for (const auto& r : rows) {
      if (const auto c = at(r.goodput_at, i)) seen.insert(*c);
    }
    concurrencies.insert(seen.begin(), seen.end());
    if (seen.size() > 1) {
      at_column = true;
      columns.push_back({"at c", 4, [&at, i](const CompareRow& r) {
                           const auto c = at(r.goodput_at, i);
                           return c ? std::to_string(*c) : std::string("-");
                         }});
    }
  }
  if (!at_column && concurrencies.size() == 1) taken_at = std::to_string(*concurrencies.begin());
  columns.push_back({"tok/s", 6, [](const CompareRow& r) {
                       return Fixed(r.output_tokens_per_s, r.output_tokens_per_s < 100 ? 1 : 0);
                     }});
  columns.push_back({"ratio", 5, [](const CompareRow& r) { return Fixed(r.throughput_ratio, 2); }});
  columns.push_back({"TTFT50", 6, [&ms](const CompareRow& r) { return ms(r.ttft.p50); }});
  columns.push_back({"TTFT99", 6, [&ms](const CompareRow& r) { return ms(r.ttft.p99); }});
  columns.push_back({"ITL50", 5, [&ms](const CompareRow& r) { return ms(r.itl.p50); }});
  columns.push_back({"ITL99", 5, [&ms](const CompareRow& r) { return ms(r.itl.p99); }});
  const bool cached = any_row([](const CompareRow& r) { return r.cached_fraction.has_value(); });
  const bool cpu = any_row([](const CompareRow& r) { return r.external_hit_rate.has_value(); });
  const bool stop = any_row([](const CompareRow& r) { return !r.stopped_after.empty(); });
  if (cached) {
    columns.push_back(
        {"cached", 6, [](const CompareRow& r) { return Fixed(r.cached_fraction, 3); }});
  }
  if (cpu) {
    columns.push_back(
        {"cpu", 5, [](const CompareRow& r) { return Fixed(r.external_hit_rate, 3); }});
  }
  if (stop) {
    columns.push_back({"stop", 4, [](const CompareRow& r) {
                         return r.stopped_after.empty() ? std::string("-") : r.stopped_after;
                       }});
  }

  std::ostringstream out;
  auto pad = [](const std::string& text, std::size_t width, bool left) {
    if (text.size() >= width) return text;
    const std::string fill(width - text.size(), ' ');
    return left ? text + fill : fill + text;
  };
  std::size_t router_width = 6;
  for (const auto& r : rows) router_width = std::max(router_width, r.router.size());
  out << pad("router", router_width, true);
  for (const auto& c : columns) out << ' ' << pad(c.name, c.width, false);
  out << '\n';
  for (const auto& r : rows) {
    out << pad(r.router, router_width, true);
    for (const auto& c : columns) out << ' ' << pad(c.cell(r), c.width, false);
    out << '\n';
  }

  // The legend: a sentence per column shown. '\x01' is a space the wrap must not break at
  // (phrases scripts and tests look for).
  auto keep = [](std::string phrase) {
    std::ranges::replace(phrase, ' ', '\x01');
    return phrase;
  };
  std::string legend = "ok, fail: requests answered and failed.";
  if (!shown.empty()) {
    std::string names, speeds;
    for (std::size_t i = 0; i < shown.size(); ++i) {
      const char* sep = i == 0 ? "" : (i + 1 == shown.size() ? " and " : ", ");
      names += sep + shown[i];
      speeds += sep + shown[i].substr(3);
    }
    legend += " " + names + ": goodput (Infera's), output tokens/s per GPU while every user gets " +
              speeds + " tokens/s or more";
    legend += taken_at.empty() ? "" : ", at concurrency " + taken_at;
    legend += at_column ? "; at c: the concurrency it was taken at." : ".";
  }
  for (const auto& same : same_as_previous) legend += " " + same + " in every row.";
  legend += " tok/s: output tokens/s. ratio: the column to its left over " + meta.baseline +
            "'s. TTFT50/99 and ITL50/99: median and 99th percentile of the time to first token "
            "and of the gaps between tokens, ms.";
  if (cached) legend += " cached: share of the prompt tokens served from a KV cache.";
  if (cpu) legend += " cpu: hit rate of the CPU KV tier.";
  if (stop) legend += " stop: the level after which the stop rule ended the sweep.";
  std::string time_base = workload::TimeBaseNote(meta.speedup);
  const std::size_t clause = time_base.find(';');
  time_base = keep(time_base.substr(0, clause)) +
              (clause == std::string::npos ? "" : time_base.substr(clause));
  time_base[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(time_base[0])));
  legend += " " + time_base + ".";
  if (meta.speedup != 1) {
    char note[200];
    std::snprintf(note, sizeof note, "counts as %g model milliseconds", meta.speedup);
    legend +=
        " The routers and the client run in real time, so each real millisecond a proxy "
        "adds " +
        keep(note) + " (nginx's and kvroute's alike).";
  }
  legend += " More columns (the engines' hit rates, means) in compare.json and compare.csv.";
  out << WrapText(legend, kWidth);
  std::string text = out.str();
  std::ranges::replace(text, '\x01', ' ');
  return text;
}

std::string CompareJson(const std::vector<CompareRow>& rows, const CompareMeta& meta) {
  boost::json::object doc;
  doc["schema"] = "kvroute.bench.compare/1";
  doc["baseline"] = meta.baseline;
  doc["speedup"] = meta.speedup;
  doc["time_base"] = workload::TimeBaseNote(meta.speedup);
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
