#include "workload/report.h"

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/format.h"
#include "workload/time_base.h"

namespace kvroute::workload {
namespace json = boost::json;

namespace {

// `kvroute simulate` runs in virtual time: no wall clock is involved at all.
std::string RunTimeBaseNote(const RunReport& run) {
  if (run.target == "simulate") return "times are simulated (virtual) model time";
  return TimeBaseNote(run.time_scale);
}


json::value Opt(const std::optional<double>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

json::object SummaryJson(const Summary& s) {
  return json::object{{"count", s.count}, {"mean", s.mean}, {"min", s.min}, {"max", s.max},
                      {"p50", s.p50},     {"p90", s.p90},   {"p99", s.p99}};
}


std::string OptNum(const std::optional<double>& v) { return v ? ShortNumber(*v) : std::string(); }

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

bool IsClosedLoop(const LevelResult& l) { return l.concurrency > 0; }

}  // namespace

LevelSummary SummarizeLevel(const LevelResult& level, const std::optional<SloTargets>& slo) {
  LevelSummary s;
  std::vector<double> ttft, itl, e2e, tpot;
  std::vector<RequestResult> all;
  std::uint64_t prompt_for_cache = 0;
  for (const RequestRecord& rec : level.requests) {
    if (rec.warmup) continue;
    const RequestResult& r = rec.result;
    all.push_back(r);
    ++s.sent;
    if (!r.ok) {
      ++s.failed;
      ++s.errors[r.error_kind.empty() ? "unknown" : r.error_kind];
      continue;
    }
    ++s.ok;
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    if (r.output_tokens > 1) tpot.push_back(Tpot(r));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    s.input_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    s.cached_tokens += r.cached_tokens;
    prompt_for_cache += r.prompt_tokens;
  }
  s.ttft = Summarize(ttft);
  s.itl = Summarize(itl);
  s.e2e = Summarize(e2e);
  s.tpot = Summarize(tpot);
  if (level.duration_s > 0) {
    s.input_tokens_per_s = static_cast<double>(s.input_tokens) / level.duration_s;
    s.output_tokens_per_s = static_cast<double>(s.output_tokens) / level.duration_s;
    s.requests_per_s = static_cast<double>(s.ok) / level.duration_s;
  }
  if (prompt_for_cache > 0) {
    s.client_cached_fraction =
        static_cast<double>(s.cached_tokens) / static_cast<double>(prompt_for_cache);
  }
  if (slo) s.slo_attainment = SloAttainment(all, *slo);
  return s;
}

std::vector<InferaGoodput> InferaGoodputs(const RunReport& run) {
  std::vector<ConcurrencyLevel> levels;
  for (const LevelResult& l : run.levels) {
    if (!IsClosedLoop(l)) continue;
    LevelSummary s = SummarizeLevel(l, std::nullopt);
    levels.push_back(ConcurrencyLevel{.concurrency = l.concurrency,
                                      .duration_s = l.duration_s,
                                      .total_tokens = s.input_tokens + s.output_tokens,
                                      .itl_p50_s = s.itl.p50});
  }
  std::vector<InferaGoodput> out;
  if (levels.empty()) return out;
  for (double target : run.itl_targets_tps) {
    out.push_back(ComputeInferaGoodput(levels, target, std::max(1, run.gpus)));
  }
  return out;
}

std::optional<DistServeGoodput> DistServeGoodputOf(const RunReport& run) {
  if (!run.slo) return std::nullopt;
  std::vector<RateLevel> levels;
  for (const LevelResult& l : run.levels) {
    if (IsClosedLoop(l) || l.rate_per_s <= 0) continue;
    RateLevel rl{.rate_per_s = l.rate_per_s, .requests = {}};
    for (const RequestRecord& r : l.requests) rl.requests.push_back(r.result);
    levels.push_back(std::move(rl));
  }
  if (levels.empty()) return std::nullopt;
  return ComputeDistServeGoodput(levels, *run.slo, std::max(1, run.gpus));
}

std::string RunJson(const RunReport& run) {
  json::object doc;
  doc["schema"] = "kvroute.bench.run/1";
  doc["label"] = run.label;
  doc["target"] = run.target;
  doc["workload"] = run.workload;
  doc["started_at"] = run.started_at;
  doc["gpus"] = run.gpus;
  json::object config;
  for (const auto& [key, value] : run.config) {
    if (const double* d = std::get_if<double>(&value)) {
      config[key] = *d;
    } else {
      config[key] = std::get<std::string>(value);
    }
  }
  doc["config"] = std::move(config);
  doc["time_base"] =
      json::object{{"speedup", run.time_scale}, {"note", RunTimeBaseNote(run)}};
  json::array levels;
  for (const LevelResult& l : run.levels) {
    LevelSummary s = SummarizeLevel(l, run.slo);
    json::object lj;
    lj["name"] = l.name;
    lj["concurrency"] = IsClosedLoop(l) ? json::value(l.concurrency) : json::value(nullptr);
    lj["rate_per_s"] = l.rate_per_s > 0 ? json::value(l.rate_per_s) : json::value(nullptr);
    lj["duration_s"] = l.duration_s;
    json::object errors;
    for (const auto& [kind, n] : s.errors) errors[kind] = n;
    lj["requests"] =
        json::object{{"sent", s.sent}, {"ok", s.ok}, {"failed", s.failed}, {"errors", errors}};
    lj["ttft_s"] = SummaryJson(s.ttft);
    lj["itl_s"] = SummaryJson(s.itl);
    lj["e2e_s"] = SummaryJson(s.e2e);
    lj["tpot_s"] = SummaryJson(s.tpot);
    lj["tokens"] = json::object{
        {"input", s.input_tokens}, {"output", s.output_tokens}, {"cached", s.cached_tokens}};
    lj["throughput"] = json::object{{"input_tokens_per_s", s.input_tokens_per_s},
                                    {"output_tokens_per_s", s.output_tokens_per_s},
                                    {"requests_per_s", s.requests_per_s}};
    lj["cache"] = json::object{{"hit_rate", Opt(l.hit_rate)},
                               {"external_hit_rate", Opt(l.external_hit_rate)},
                               {"client_cached_fraction", Opt(s.client_cached_fraction)}};
    if (l.tier_hit_rate) {
      const auto& t = *l.tier_hit_rate;
      lj["cache"].as_object()["by_tier"] =
          json::object{{"GPU", t[0]}, {"CPU", t[1]}, {"DISK", t[2]}, {"SHARED", t[3]}};
    }
    lj["slo_attainment"] = Opt(s.slo_attainment);
    levels.push_back(std::move(lj));
  }
  doc["levels"] = std::move(levels);
  json::object goodput;
  json::array infera;
  const auto all = InferaGoodputs(run);
  for (std::size_t i = 0; i < run.itl_targets_tps.size() && i < all.size(); ++i) {
    const InferaGoodput& g = all[i];
    json::array points;
    for (const InferaPoint& p : g.points) {
      points.push_back(json::object{{"concurrency", p.concurrency},
                                    {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
                                    {"itl_p50_s", p.itl_p50_s},
                                    {"meets_target", p.meets_target}});
    }
    infera.push_back(
        json::object{{"target_tokens_per_s_per_user", run.itl_targets_tps[i]},
                     {"tokens_per_s_per_gpu", Opt(g.tokens_per_s_per_gpu)},
                     {"at_concurrency",
                      g.at_concurrency ? json::value(*g.at_concurrency) : json::value(nullptr)},
                     {"points", std::move(points)}});
  }
  goodput["infera"] = std::move(infera);
  if (auto ds = DistServeGoodputOf(run)) {
    json::array points;
    for (const DistServePoint& p : ds->points) {
      points.push_back(json::object{{"rate_per_s", p.rate_per_s}, {"attainment", p.attainment}});
    }
    goodput["distserve"] = json::object{{"ttft_slo_s", run.slo->ttft_s},
                                        {"tpot_slo_s", run.slo->tpot_s},
                                        {"min_attainment", run.slo->min_attainment},
                                        {"rate_per_s", Opt(ds->rate_per_s)},
                                        {"rate_per_s_per_gpu", Opt(ds->rate_per_s_per_gpu)},
                                        {"points", std::move(points)}};
  } else {
    goodput["distserve"] = nullptr;
  }
  doc["goodput"] = std::move(goodput);
  json::array skipped;
  if (run.sweep_stop) {
    for (int c : run.sweep_stop->skipped) skipped.push_back(c);
  }
  doc["sweep"] =
      json::object{{"stop_mean_itl_s", run.stop_mean_itl_s > 0 ? json::value(run.stop_mean_itl_s)
                                                               : json::value(nullptr)},
                   {"stopped_after", run.sweep_stop ? json::value(run.sweep_stop->after_level)
                                                    : json::value(nullptr)},
                   {"mean_itl_s", run.sweep_stop ? json::value(run.sweep_stop->mean_itl_s)
                                                 : json::value(nullptr)},
                   {"skipped", std::move(skipped)}};
  return json::serialize(doc) + "\n";
}

std::string LevelsCsv(const RunReport& run) {
  std::ostringstream out;
  out << "label,workload,level,concurrency,rate_per_s,duration_s,sent,ok,failed,"
         "ttft_p50_s,ttft_p90_s,ttft_p99_s,itl_p50_s,itl_p90_s,itl_p99_s,e2e_p50_s,e2e_p99_s,"
         "tpot_p50_s,input_tokens_per_s,output_tokens_per_s,requests_per_s,hit_rate,"
         "external_hit_rate,client_cached_fraction,slo_attainment,itl_mean_s\n";
  for (const LevelResult& l : run.levels) {
    LevelSummary s = SummarizeLevel(l, run.slo);
    out << CsvField(run.label) << ',' << run.workload << ',' << CsvField(l.name) << ','
        << (IsClosedLoop(l) ? std::to_string(l.concurrency) : "") << ','
        << (l.rate_per_s > 0 ? ShortNumber(l.rate_per_s) : "") << ',' << ShortNumber(l.duration_s) << ',' << s.sent
        << ',' << s.ok << ',' << s.failed << ',' << ShortNumber(s.ttft.p50) << ',' << ShortNumber(s.ttft.p90) << ','
        << ShortNumber(s.ttft.p99) << ',' << ShortNumber(s.itl.p50) << ',' << ShortNumber(s.itl.p90) << ','
        << ShortNumber(s.itl.p99) << ',' << ShortNumber(s.e2e.p50) << ',' << ShortNumber(s.e2e.p99) << ','
        << ShortNumber(s.tpot.p50) << ',' << ShortNumber(s.input_tokens_per_s) << ',' << ShortNumber(s.output_tokens_per_s)
        << ',' << ShortNumber(s.requests_per_s) << ',' << OptNum(l.hit_rate) << ','
        << OptNum(l.external_hit_rate) << ',' << OptNum(s.client_cached_fraction) << ','
        << OptNum(s.slo_attainment) << ',' << ShortNumber(s.itl.mean) << '\n';
  }
  return out.str();
}

std::string RequestsCsv(const RunReport& run) {
  std::ostringstream out;
  out << "label,level,session,turn,ok,error_kind,start_s,ttft_s,e2e_s,tpot_s,itl_count,"
         "prompt_tokens,output_tokens,cached_tokens,warmup\n";
  for (const LevelResult& l : run.levels) {
    for (const RequestRecord& rec : l.requests) {
      const RequestResult& r = rec.result;
      out << CsvField(run.label) << ',' << CsvField(l.name) << ',' << rec.session << ',' << rec.turn
          << ',' << (r.ok ? 1 : 0) << ',' << r.error_kind << ',' << ShortNumber(r.start_s) << ','
          << ShortNumber(r.ttft_s) << ',' << ShortNumber(r.e2e_s) << ',' << ShortNumber(Tpot(r)) << ',' << r.itl_s.size()
          << ',' << r.prompt_tokens << ',' << r.output_tokens << ',' << r.cached_tokens << ','
          << (rec.warmup ? 1 : 0) << '\n';
    }
  }
  return out.str();
}

std::string TerminalTable(const RunReport& run) {
  std::ostringstream out;
  char line[256];
  out << "kvroute bench: " << run.label << " (" << run.workload << ") → " << run.target << "\n";
  out << RunTimeBaseNote(run) << "\n";
  std::snprintf(line, sizeof line, "%-10s %6s %6s %9s %9s %9s %9s %10s %10s %8s\n", "level", "ok",
                "failed", "ttft p50", "ttft p99", "itl p50", "itl p99", "in tok/s", "out tok/s",
                "cached");
  out << line;
  for (const LevelResult& l : run.levels) {
    LevelSummary s = SummarizeLevel(l, run.slo);
    // The headline is what clients were served from cache (usage.cached_tokens over prompt
    // tokens); the engine's hit rate also counts its own re-checks after preemptions and
    // stays in the files (issue 15: 0.204 printed where 0.097 of prompt tokens were cached).
    std::string hit =
        s.client_cached_fraction ? ShortNumber(*s.client_cached_fraction * 100) + "%" : "-";
    std::snprintf(
        line, sizeof line, "%-10s %6zu %6zu %8.1fms %8.1fms %8.1fms %8.1fms %10.0f %10.0f %8s\n",
        l.name.c_str(), s.ok, s.failed, s.ttft.p50 * 1e3, s.ttft.p99 * 1e3, s.itl.p50 * 1e3,
        s.itl.p99 * 1e3, s.input_tokens_per_s, s.output_tokens_per_s, hit.c_str());
    out << line;
  }
  auto infera = InferaGoodputs(run);
  for (std::size_t i = 0; i < infera.size() && i < run.itl_targets_tps.size(); ++i) {
    out << "goodput (Infera, " << ShortNumber(run.itl_targets_tps[i]) << " tok/s/user): ";
    if (infera[i].tokens_per_s_per_gpu) {
      out << ShortNumber(*infera[i].tokens_per_s_per_gpu) << " tok/s/GPU at concurrency "
          << *infera[i].at_concurrency << "\n";
    } else {
      out << "no level meets the target\n";
    }
  }
  // Engines with lower tiers: where the prompt tokens served from cache came from (engine
  // counters over every prompt token queried; the JSON's cache.by_tier).
  for (const LevelResult& l : run.levels) {
    if (!l.tier_hit_rate) continue;
    const auto& t = *l.tier_hit_rate;
    std::snprintf(line, sizeof line,
                  "hit rate by tier, %s: GPU %.3f, CPU %.3f, DISK %.3f, SHARED %.3f\n",
                  l.name.c_str(), t[0], t[1], t[2], t[3]);
    out << line;
  }
  if (run.sweep_stop) out << SweepStopNote(*run.sweep_stop, run.stop_mean_itl_s) << "\n";
  if (auto ds = DistServeGoodputOf(run)) {
    out << "goodput (DistServe, TTFT≤" << ShortNumber(run.slo->ttft_s) << "s TPOT≤" << ShortNumber(run.slo->tpot_s)
        << "s): ";
    if (ds->rate_per_s) {
      out << ShortNumber(*ds->rate_per_s) << " req/s\n";
    } else {
      out << "no rate attains the SLO\n";
    }
  }
  return out.str();
}

std::string FileStem(const std::string& label) {
  if (label.empty()) return "run";
  std::string out = label;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

std::expected<void, std::string> WriteRunFiles(const RunReport& run, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return std::unexpected("cannot create " + dir + ": " + ec.message());
  const std::string stem = dir + "/" + FileStem(run.label);
  const std::pair<std::string, std::string> files[] = {
      {stem + ".json", RunJson(run)},
      {stem + "_levels.csv", LevelsCsv(run)},
      {stem + "_requests.csv", RequestsCsv(run)},
  };
  for (const auto& [path, content] : files) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << content;
    if (!f) return std::unexpected("cannot write " + path);
  }
  return {};
}

std::vector<ConfigEntry> AgenticConfig(const AgenticOptions& a, Nanos think_time,
                                       Nanos turn_jitter, const AgenticProcedure& procedure) {
  std::vector<ConfigEntry> out = {{"sessions", static_cast<double>(a.sessions)},
          {"common_prefix_tokens", static_cast<double>(a.common_prefix_tokens)},
          {"session_prefix_tokens", static_cast<double>(a.session_prefix_tokens)},
          {"turns", static_cast<double>(a.turns)},
          {"turn_input_tokens", static_cast<double>(a.turn_input_tokens)},
          {"output_tokens", static_cast<double>(a.output_tokens)},
          {"think_time_s", ToSeconds(think_time)},
          {"turn_jitter_s", ToSeconds(turn_jitter)}};
  // Named only when on, so the files of runs without them stay as they were.
  if (procedure.warmup_step) out.push_back({"warmup_step", std::string("on")});
  if (procedure.early_stop) out.push_back({"early_stop", std::string("on")});
  return out;
}

std::vector<ConfigEntry> SharedPrefixConfig(const SharedPrefixOptions& sp,
                                            double requests_per_rate) {
  return {{"groups", static_cast<double>(sp.groups)},
          {"prompts_per_group", static_cast<double>(sp.prompts_per_group)},
          {"system_prompt_tokens", static_cast<double>(sp.system_prompt_tokens)},
          {"question_tokens", static_cast<double>(sp.question_tokens)},
          {"output_tokens", static_cast<double>(sp.output_tokens)},
          {"requests_per_rate", requests_per_rate}};
}

}  // namespace kvroute::workload
