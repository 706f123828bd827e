#include "simulate/sim_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string_view>
#include <utility>

#include "common/format.h"
#include "fleet/router_state.h"
#include "kv/kv_event.h"

namespace kvroute::simulate {
namespace {

// The median of a request's inter-token gaps (the upper middle of an even count).
double MedianOf(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::expected<void, std::string> WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return std::unexpected("cannot write " + path);
  return {};
}

}  // namespace

SimLevelExtras AppendLevel(SimResult result, const std::string& name, workload::RunReport* report) {
  SimLevelExtras x;
  x.level = name;
  x.decisions = std::move(result.decisions);
  x.workers = std::move(result.workers);
  x.virtual_s = result.virtual_s;
  x.wall_s = result.wall_s;
  x.events = result.events;
  x.steps = result.steps;
  x.rejected = result.rejected;
  x.first_rejection = std::move(result.first_rejection);
  x.pd = std::move(result.pd);
  x.pins_expired = result.pins_expired;
  x.shared_credited_blocks = result.shared_credited_blocks;
  x.shared_missing_blocks = result.shared_missing_blocks;
  x.store_leases = result.store_leases;
  x.store_leases_expired = result.store_leases_expired;
  x.store_refused_full = result.store_refused_full;
  result.level.name = name;
  report->levels.push_back(std::move(result.level));
  return x;
}

std::string WorkersCsv(const std::vector<SimLevelExtras>& levels) {
  std::ostringstream out;
  out << "level,worker,profile,alive,restarts,gpus,routed,prefix_cache_queries,"
         "prefix_cache_hits,hit_rate,cpu_cache_hits,preemptions,prompt_tokens,generation_tokens\n";
  for (const SimLevelExtras& l : levels) {
    for (const WorkerReport& w : l.workers) {
      const auto& s = w.stats;
      out << l.level << ',' << w.id << ',' << w.profile << ',' << (w.alive ? 1 : 0) << ','
          << w.restarts << ',' << w.gpus << ',' << w.routed << ',' << s.prefix_cache_queries << ','
          << s.prefix_cache_hits << ',';
      if (s.prefix_cache_queries > 0) {
        out << ShortNumber(static_cast<double>(s.prefix_cache_hits) /
                   static_cast<double>(s.prefix_cache_queries));
      }
      out << ',' << s.cpu_cache_hits << ',' << s.num_preemptions << ',' << s.prompt_tokens << ','
          << s.generation_tokens << '\n';
    }
  }
  return out.str();
}

std::string DecisionsCsv(const workload::RunReport& report,
                         const std::vector<SimLevelExtras>& levels) {
  std::ostringstream out;
  out << "level,request,worker,at_s,prompt_tokens,predicted_cached_tokens,cached_tokens,"
         "predicted_ttft_s,ttft_s,inflight_at_route,pending_prefill_at_route,ok,predicted_wait_s,"
         "wait_correction,split,prefill_worker,predicted_prefill_tokens,predicted_itl_s,itl_p50_s,"
         "engine_wait_s,tier_path_queue_s,tier_transfer_s\n";
  for (std::size_t li = 0; li < levels.size() && li < report.levels.size(); ++li) {
    const auto& reqs = report.levels[li].requests;
    for (const DecisionRecord& d : levels[li].decisions) {
      if (d.request >= reqs.size()) continue;
      const workload::RequestResult& r = reqs[d.request].result;
      out << levels[li].level << ',' << d.request << ',' << d.worker << ',' << ShortNumber(d.at_s) << ','
          << d.prompt_tokens << ',' << d.predicted_cached_tokens << ',';
      if (r.ok) out << r.cached_tokens;
      out << ',';
      if (d.predicted_ttft_s) out << ShortNumber(*d.predicted_ttft_s);
      out << ',';
      if (r.ok) out << ShortNumber(r.ttft_s);
      out << ',' << d.inflight_at_route << ',' << d.pending_prefill_at_route << ','
          << (r.ok ? 1 : 0) << ',';
      if (d.predicted_wait_s) out << ShortNumber(*d.predicted_wait_s);
      out << ',' << ShortNumber(d.wait_correction_at_route) << ',' << (d.split ? 1 : 0) << ','
          << d.prefill_worker << ',' << d.predicted_prefill_tokens << ',';
      if (d.predicted_itl_s) out << ShortNumber(*d.predicted_itl_s);
      out << ',';
      if (r.ok && !r.itl_s.empty()) out << ShortNumber(MedianOf(r.itl_s));
      out << ',';
      if (d.engine_wait_s) out << ShortNumber(*d.engine_wait_s);
      out << ',' << ShortNumber(d.tier_path_queue_s) << ',' << ShortNumber(d.tier_transfer_s)
          << '\n';
    }
  }
  return out.str();
}

std::expected<void, std::string> WriteSimFiles(const workload::RunReport& report,
                                               const std::vector<SimLevelExtras>& levels,
                                               const std::string& stem) {
  if (auto ok = WriteFile(stem + "_workers.csv", WorkersCsv(levels)); !ok) return ok;
  return WriteFile(stem + "_decisions.csv", DecisionsCsv(report, levels));
}

std::string RunLine(const SimLevelExtras& l, std::size_t requests) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "level %s: %zu requests, virtual %.1f s, wall %.1f s (%.0fx), %llu events, "
      "%llu engine steps",
      l.level.c_str(), requests, l.virtual_s, l.wall_s, l.wall_s > 0 ? l.virtual_s / l.wall_s : 0.0,
      static_cast<unsigned long long>(l.events), static_cast<unsigned long long>(l.steps));
  return buf;
}

std::string PdLine(const workload::LevelResult& level, const SimLevelExtras& extras) {
  if (extras.pd.empty()) return "";
  std::vector<double> bytes, seconds, share;
  std::size_t split = 0, served = 0;
  for (const PdRecord& p : extras.pd) {
    if (p.request >= level.requests.size() || !level.requests[p.request].result.ok) continue;
    ++served;
    if (!p.split) continue;
    ++split;
    if (!p.transferred) continue;
    bytes.push_back(p.transfer_bytes);
    seconds.push_back(p.transfer_s);
    const double ttft = level.requests[p.request].result.ttft_s;
    if (ttft > 0) share.push_back(p.transfer_s / ttft);
  }
  const auto q = [](std::vector<double>& v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
  };
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "level %s: P/D split %zu of %zu served requests; transfer per split request: "
                "%.1f MB p50 / %.1f MB p99, %.2f ms p50 / %.2f ms p99, %.2f %% p50 / %.2f %% p99 "
                "of its TTFT; pins expired %llu",
                extras.level.c_str(), split, served, q(bytes, 0.5) / 1e6, q(bytes, 0.99) / 1e6,
                q(seconds, 0.5) * 1e3, q(seconds, 0.99) * 1e3, q(share, 0.5) * 100,
                q(share, 0.99) * 100, static_cast<unsigned long long>(extras.pins_expired));
  return buf;
}

std::string SharedCreditLine(const SimLevelExtras& extras) {
  if (extras.shared_credited_blocks == 0) return "";
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "level %s: shared-store credit %llu blocks on the chosen workers, %llu not found "
                "at scheduling (%.3f %%, an upper bound); store leases %llu, %llu expired "
                "before scheduling, %llu blocks refused (all held leased)",
                extras.level.c_str(), static_cast<unsigned long long>(extras.shared_credited_blocks),
                static_cast<unsigned long long>(extras.shared_missing_blocks),
                100.0 * static_cast<double>(extras.shared_missing_blocks) /
                    static_cast<double>(extras.shared_credited_blocks),
                static_cast<unsigned long long>(extras.store_leases),
                static_cast<unsigned long long>(extras.store_leases_expired),
                static_cast<unsigned long long>(extras.store_refused_full));
  return buf;
}

std::string TierLearningLine(const std::string& level, const fleet::RouterState& router) {
  std::string out;
  for (Tier t : {Tier::kCpu, Tier::kDisk, Tier::kShared}) {
    double log_sum = 0, lo = 0, hi = 0;
    std::uint64_t samples = 0;
    int n = 0;
    for (const fleet::WorkerInfo& w : router.List()) {
      auto learner = router.TierLoads(w.id);
      if (!learner || !learner->seed(t)) continue;
      const double ratio = *learner->bytes_per_s(t) / *learner->seed(t);
      log_sum += std::log(ratio);
      lo = n == 0 ? ratio : std::min(lo, ratio);
      hi = n == 0 ? ratio : std::max(hi, ratio);
      samples += learner->samples(t);
      ++n;
    }
    if (n == 0) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s %s %.2f (%.2f-%.2f, %llu samples)", out.empty() ? "" : ",",
                  kv::TierName(t), std::exp(log_sum / n), lo, hi,
                  static_cast<unsigned long long>(samples));
    out += buf;
  }
  if (out.empty()) return "";
  return "level " + level + ": tier bandwidths learned/seed" + out;
}

std::string CalibrationLine(const workload::LevelResult& level, const SimLevelExtras& extras) {
  std::vector<double> ratios;
  for (const DecisionRecord& d : extras.decisions) {
    if (!d.predicted_ttft_s || *d.predicted_ttft_s <= 0 || d.request >= level.requests.size()) {
      continue;
    }
    const workload::RequestResult& r = level.requests[d.request].result;
    if (r.ok && r.ttft_s > 0) ratios.push_back(r.ttft_s / *d.predicted_ttft_s);
  }
  if (ratios.empty()) return "";
  std::sort(ratios.begin(), ratios.end());
  const auto q = [&](double p) {
    return ratios[static_cast<std::size_t>(p * static_cast<double>(ratios.size() - 1))];
  };
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "level %s: TTFT measured / predicted on the chosen worker: p10 %.2f, p50 %.2f, "
                "p90 %.2f (%zu requests)",
                extras.level.c_str(), q(0.1), q(0.5), q(0.9), ratios.size());
  return buf;
}

std::optional<std::string> FailureNote(const workload::RunReport& report,
                                       const std::vector<SimLevelExtras>& levels) {
  std::size_t sent = 0, failed = 0;
  std::map<std::string, std::size_t> kinds;
  for (const auto& level : report.levels) {
    for (const auto& r : level.requests) {
      ++sent;
      if (r.result.ok) continue;
      ++failed;
      ++kinds[r.result.error_kind.empty() ? "unknown" : r.result.error_kind];
    }
  }
  if (failed == 0) return std::nullopt;
  std::vector<std::pair<std::string, std::size_t>> by_count(kinds.begin(), kinds.end());
  std::ranges::stable_sort(by_count, std::greater<>{},
                           &std::pair<std::string, std::size_t>::second);
  std::ostringstream out;
  const bool most = failed * 2 > sent;
  out << (most ? "WARNING: " : "note: ") << failed << " of " << sent << " requests failed (";
  for (std::size_t i = 0; i < by_count.size(); ++i) {
    out << (i ? ", " : "") << by_count[i].first << ' ' << by_count[i].second;
  }
  out << ")";
  std::uint64_t rejected = 0;
  std::string reason;
  for (const SimLevelExtras& l : levels) {
    rejected += l.rejected;
    if (reason.empty()) reason = l.first_rejection;
  }
  if (rejected > 0) {
    // The engine's reason names the limit: "... exceeds max_model_len 40960".
    constexpr std::string_view kLimit = "exceeds max_model_len ";
    const std::size_t at = reason.find(kLimit);
    if (at != std::string::npos) {
      out << ": the engines refused " << rejected << " requests longer than max_model_len "
          << reason.substr(at + kLimit.size()) << " (first: " << reason << ")";
      if (report.workload == "agentic") {
        out << ". The sessions outgrow the context: shorten them (--turns, --turn-input-tokens, "
               "--output-tokens, --common-prefix-tokens, --session-prefix-tokens) or raise "
               "--max-model-len";
      } else {
        out << ". Raise --max-model-len to serve them";
      }
    } else {
      out << ": the engines refused " << rejected << " requests at admission (first: " << reason
          << ")";
    }
  }
  if (most) out << ". Latency and goodput describe only the requests that succeeded";
  out << ".";
  return out.str();
}

std::optional<std::uint64_t> PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      std::uint64_t kb = 0;
      if (fields >> kb) return kb * 1024;
    }
  }
  return std::nullopt;
}

}  // namespace kvroute::simulate
