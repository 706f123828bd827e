#include "bench/overhead.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <sstream>

namespace kvroute::bench {
namespace json = boost::json;

namespace {

const OverheadLevel* Find(const OverheadReport& report, int concurrency,
                          const std::string& target) {
  for (const auto& l : report.levels) {
    if (l.concurrency == concurrency && l.target == target) return &l;
  }
  return nullptr;
}

bool IsKvroute(const std::string& target) { return target.starts_with("kvroute:"); }

std::optional<double> RatioVsNginx(const OverheadReport& report, const OverheadLevel& level) {
  const OverheadLevel* nginx = Find(report, level.concurrency, "nginx-rr");
  if (nginx == nullptr || nginx->RequestsPerS() <= 0) return std::nullopt;
  return level.RequestsPerS() / nginx->RequestsPerS();
}

std::optional<AddedLatency> AddedFor(const OverheadReport& report, const OverheadLevel& level) {
  if (level.target == "direct") return std::nullopt;
  const OverheadLevel* direct = Find(report, level.concurrency, "direct");
  if (direct == nullptr) return std::nullopt;
  return AddedVsDirect(level, *direct);
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string Signed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.*f", decimals, v);
  return buf;
}

std::string Ms(double s) { return Fixed(s * 1000.0, 2); }

std::string CpuUs(double us) { return us < 0 ? std::string("-") : Fixed(us, 0); }

json::object SummaryMs(const workload::Summary& s) {
  return {{"count", s.count},       {"mean_ms", s.mean * 1000}, {"p50_ms", s.p50 * 1000},
          {"p90_ms", s.p90 * 1000}, {"p99_ms", s.p99 * 1000},   {"min_ms", s.min * 1000},
          {"max_ms", s.max * 1000}};
}

}  // namespace

double OverheadLevel::RequestsPerS() const {
  return elapsed_s > 0 ? static_cast<double>(ok) / elapsed_s : 0;
}

double OverheadLevel::ChunksPerS() const {
  return elapsed_s > 0 ? static_cast<double>(chunks) / elapsed_s : 0;
}

double OverheadLevel::ProxyRunqUsPerRequest() const {
  if (proxy_runq_s < 0 || all_requests <= 0) return -1;
  return proxy_runq_s * 1e6 / all_requests;
}

double OverheadLevel::ProxyCpuUsPerRequest() const {
  if (proxy_cpu_s < 0 || all_requests <= 0) return -1;
  return proxy_cpu_s * 1e6 / all_requests;
}

double OverheadLevel::TotalCpuUsPerRequest() const {
  if (proxy_cpu_s < 0 || sims_cpu_s < 0 || client_cpu_s < 0 || all_requests <= 0) return -1;
  return (proxy_cpu_s + sims_cpu_s + client_cpu_s) * 1e6 / all_requests;
}

OverheadLevel SummarizeOverheadLevel(std::string target, int concurrency,
                                     std::span<const OverheadSample> samples, double elapsed_s) {
  OverheadLevel level;
  level.target = std::move(target);
  level.concurrency = concurrency;
  std::vector<double> latency, e2e;
  latency.reserve(samples.size());
  e2e.reserve(samples.size());
  double first = 0, last = 0;
  bool any = false;
  for (const OverheadSample& s : samples) {
    first = any ? std::min(first, s.start_s) : s.start_s;
    last = any ? std::max(last, s.start_s + s.e2e_s) : s.start_s + s.e2e_s;
    any = true;
    if (!s.error_kind.empty()) {
      ++level.errors;
      ++level.error_kinds[s.error_kind];
      continue;
    }
    ++level.ok;
    level.chunks += s.chunks;
    latency.push_back(s.latency_s);
    e2e.push_back(s.e2e_s);
  }
  level.elapsed_s = elapsed_s > 0 ? elapsed_s : (any ? last - first : 0);
  level.latency = workload::Summarize(latency);
  level.e2e = workload::Summarize(e2e);
  return level;
}

std::optional<AddedLatency> AddedVsDirect(const OverheadLevel& target,
                                          const OverheadLevel& direct) {
  if (target.latency.count == 0 || direct.latency.count == 0) return std::nullopt;
  return AddedLatency{target.latency.p50 - direct.latency.p50,
                      target.latency.p90 - direct.latency.p90,
                      target.latency.p99 - direct.latency.p99};
}

std::vector<OverheadVerdict> OverheadVerdicts(const OverheadReport& report) {
  std::vector<OverheadVerdict> out;
  for (const OverheadLevel& l : report.levels) {
    if (!IsKvroute(l.target)) continue;
    OverheadVerdict v;
    v.target = l.target;
    v.concurrency = l.concurrency;
    v.throughput_ratio = RatioVsNginx(report, l);
    if (auto added = AddedFor(report, l)) v.added_p99_s = added->p99;
    v.throughput_met = v.throughput_ratio && *v.throughput_ratio >= kTargetThroughputRatio;
    v.latency_met = v.added_p99_s && *v.added_p99_s <= kTargetAddedP99S;
    out.push_back(std::move(v));
  }
  return out;
}

std::string OverheadTable(const OverheadReport& report) {
  const auto& c = report.config;
  const std::string lat = c.stream ? "TTFT" : "E2E";
  std::ostringstream o;
  o << "kvroute bench overhead: " << c.workers << " sims (speedup " << c.speedup << "), "
    << (c.stream ? "streamed" : "non-streamed") << " requests of " << c.prompt_tokens
    << " prompt / " << c.output_tokens << " output tokens; " << c.requests
    << " recorded requests per level after " << c.warmup_requests << " warm-up, cap "
    << c.duration_s << " s\n";
  o << "load average (1 min) " << Fixed(c.load_before, 2) << " before, " << Fixed(c.load_after, 2)
    << " after, " << c.cpus
    << " CPUs; placement: " << (c.pinning.empty() ? std::string("left to the OS") : c.pinning)
    << "; router lanes (kvroute lanes = nginx workers): "
    << (c.router_lanes > 0 ? std::to_string(c.router_lanes) : std::string("defaults")) << "\n";
  o << "latency = " << lat << " (ms); +p50/+p99 = target - direct at the same percentile and "
    << "concurrency (percentiles of each run, not paired differences);\n"
    << "proxyCPU / allCPU = CPU microseconds per request of the proxy / of proxy + sims + "
    << "client (warm-up included); proxyRunq = microseconds per request the proxy's threads "
    << "waited for a CPU while runnable (large: starved by other processes)\n";
  char line[256];
  std::snprintf(line, sizeof line,
                "%5s  %-26s %7s %5s %9s %10s %8s %8s %8s %8s %8s %7s %8s %8s %9s\n", "conc",
                "target", "ok", "err", "req/s", "chunks/s", "p50", "p90", "p99", "+p50", "+p99",
                "xnginx", "proxyCPU", "allCPU", "proxyRunq");
  o << line;
  for (const OverheadLevel& l : report.levels) {
    const auto added = AddedFor(report, l);
    const auto ratio = RatioVsNginx(report, l);
    std::snprintf(line, sizeof line,
                  "%5d  %-26s %7zu %5zu %9.1f %10.0f %8s %8s %8s %8s %8s %7s %8s %8s %9s\n",
                  l.concurrency, l.target.c_str(), l.ok, l.errors, l.RequestsPerS(), l.ChunksPerS(),
                  Ms(l.latency.p50).c_str(), Ms(l.latency.p90).c_str(), Ms(l.latency.p99).c_str(),
                  added ? Signed(added->p50 * 1000, 2).c_str() : "-",
                  added ? Signed(added->p99 * 1000, 2).c_str() : "-",
                  ratio ? Fixed(*ratio, 2).c_str() : "-", CpuUs(l.ProxyCpuUsPerRequest()).c_str(),
                  CpuUs(l.TotalCpuUsPerRequest()).c_str(),
                  CpuUs(l.ProxyRunqUsPerRequest()).c_str());
    o << line;
  }
  for (const OverheadVerdict& v : OverheadVerdicts(report)) {
    o << "c=" << v.concurrency << " " << v.target << ": req/s "
      << (v.throughput_ratio ? Fixed(*v.throughput_ratio, 2) + "x nginx-rr" : "n/a")
      << " (target >= " << Fixed(kTargetThroughputRatio, 1) << ": "
      << (v.throughput_met ? "met" : "NOT met") << "); added p99 "
      << (v.added_p99_s ? Signed(*v.added_p99_s * 1000, 2) + " ms" : "n/a")
      << " (target <= " << Fixed(kTargetAddedP99S * 1000, 0)
      << " ms: " << (v.latency_met ? "met" : "NOT met") << ")\n";
  }
  return o.str();
}

std::string OverheadJson(const OverheadReport& report) {
  const auto& c = report.config;
  json::object config{{"label", c.label},
                      {"workers", c.workers},
                      {"profile", c.profile.empty() ? std::string("default") : c.profile},
                      {"speedup", c.speedup},
                      {"stream", c.stream},
                      {"latency_metric", c.stream ? "ttft" : "e2e"},
                      {"prompt_tokens", c.prompt_tokens},
                      {"output_tokens", c.output_tokens},
                      {"requests_per_level", c.requests},
                      {"warmup_requests_per_level", c.warmup_requests},
                      {"duration_cap_s", c.duration_s},
                      {"policy", c.policy},
                      {"pinning", c.pinning},
                      {"router_lanes", c.router_lanes},
                      {"started_at", c.started_at},
                      {"load_average_1m_before", c.load_before},
                      {"load_average_1m_after", c.load_after},
                      {"cpus", c.cpus},
                      {"added_latency_method",
                       "target minus direct at the same percentile and concurrency, percentiles "
                       "of each run (not paired differences)"}};
  json::array levels;
  for (const OverheadLevel& l : report.levels) {
    json::object errors;
    for (const auto& [kind, n] : l.error_kinds) errors[kind] = n;
    json::object o{{"target", l.target},
                   {"concurrency", l.concurrency},
                   {"ok", l.ok},
                   {"errors", l.errors},
                   {"error_kinds", std::move(errors)},
                   {"elapsed_s", l.elapsed_s},
                   {"requests_per_s", l.RequestsPerS()},
                   {"chunks", l.chunks},
                   {"chunks_per_s", l.ChunksPerS()},
                   {"latency", SummaryMs(l.latency)},
                   {"e2e", SummaryMs(l.e2e)},
                   {"cpu_s", json::object{{"proxy", l.proxy_cpu_s},
                                          {"sims", l.sims_cpu_s},
                                          {"client", l.client_cpu_s}}},
                   {"all_requests", l.all_requests},
                   {"proxy_cpu_us_per_request", l.ProxyCpuUsPerRequest()},
                   {"total_cpu_us_per_request", l.TotalCpuUsPerRequest()},
                   {"proxy_runq_s", l.proxy_runq_s},
                   {"proxy_runq_us_per_request", l.ProxyRunqUsPerRequest()}};
    if (auto added = AddedFor(report, l)) {
      o["added_vs_direct_ms"] = json::object{
          {"p50", added->p50 * 1000}, {"p90", added->p90 * 1000}, {"p99", added->p99 * 1000}};
    }
    if (auto ratio = RatioVsNginx(report, l)) o["requests_per_s_vs_nginx_rr"] = *ratio;
    levels.push_back(std::move(o));
  }
  json::array verdicts;
  for (const OverheadVerdict& v : OverheadVerdicts(report)) {
    json::object o{{"target", v.target},
                   {"concurrency", v.concurrency},
                   {"throughput_met", v.throughput_met},
                   {"latency_met", v.latency_met}};
    o["throughput_ratio"] = v.throughput_ratio ? json::value(*v.throughput_ratio) : nullptr;
    o["added_p99_ms"] = v.added_p99_s ? json::value(*v.added_p99_s * 1000) : nullptr;
    verdicts.push_back(std::move(o));
  }
  json::object doc{
      {"config", std::move(config)},
      {"targets", json::object{{"throughput_ratio_vs_nginx_rr", kTargetThroughputRatio},
                               {"added_p99_ms", kTargetAddedP99S * 1000}}},
      {"levels", std::move(levels)},
      {"verdicts", std::move(verdicts)}};
  return json::serialize(doc) + "\n";
}

std::string OverheadCsv(const OverheadReport& report) {
  std::ostringstream o;
  o << "concurrency,target,ok,errors,elapsed_s,requests_per_s,chunks_per_s,latency_p50_ms,"
       "latency_p90_ms,latency_p99_ms,e2e_p50_ms,e2e_p99_ms,added_p50_ms,added_p90_ms,"
       "added_p99_ms,requests_per_s_vs_nginx_rr,proxy_cpu_us_per_request,"
       "total_cpu_us_per_request,proxy_runq_us_per_request\n";
  for (const OverheadLevel& l : report.levels) {
    const auto added = AddedFor(report, l);
    const auto ratio = RatioVsNginx(report, l);
    o << l.concurrency << ',' << l.target << ',' << l.ok << ',' << l.errors << ','
      << Fixed(l.elapsed_s, 3) << ',' << Fixed(l.RequestsPerS(), 2) << ','
      << Fixed(l.ChunksPerS(), 1) << ',' << Fixed(l.latency.p50 * 1000, 3) << ','
      << Fixed(l.latency.p90 * 1000, 3) << ',' << Fixed(l.latency.p99 * 1000, 3) << ','
      << Fixed(l.e2e.p50 * 1000, 3) << ',' << Fixed(l.e2e.p99 * 1000, 3) << ','
      << (added ? Fixed(added->p50 * 1000, 3) : "") << ','
      << (added ? Fixed(added->p90 * 1000, 3) : "") << ','
      << (added ? Fixed(added->p99 * 1000, 3) : "") << ',' << (ratio ? Fixed(*ratio, 3) : "") << ','
      << Fixed(l.ProxyCpuUsPerRequest(), 1) << ',' << Fixed(l.TotalCpuUsPerRequest(), 1) << ','
      << Fixed(l.ProxyRunqUsPerRequest(), 1) << '\n';
  }
  return o.str();
}

}  // namespace kvroute::bench
