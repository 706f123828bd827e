#include "bench/topology_report.h"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace kvroute::bench {
namespace {

constexpr std::string_view kTimeMetric = "vllm:nixl_xfer_time_seconds";
constexpr std::string_view kBytesMetric = "vllm:nixl_bytes_transferred";

// "name{labels} value" or "name value" → (name, labels, value); false for comments/garbage.
bool SplitSample(std::string_view line, std::string_view* name, std::string_view* labels,
                 double* value) {
  if (line.empty() || line.front() == '#') return false;
  const auto brace = line.find('{');
  const auto space = line.rfind(' ');
  if (space == std::string_view::npos) return false;
  if (brace != std::string_view::npos && brace < space) {
    const auto close = line.find('}', brace);
    if (close == std::string_view::npos) return false;
    *name = line.substr(0, brace);
    *labels = line.substr(brace + 1, close - brace - 1);
  } else {
    *name = line.substr(0, space);
    *labels = {};
  }
  std::string_view v = line.substr(space + 1);
  if (v == "+Inf") {
    *value = std::numeric_limits<double>::infinity();
    return true;
  }
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), *value);
  return ec == std::errc() && p == v.data() + v.size();
}

// The value of le="..." in a label list; nullopt when absent.
std::optional<double> LeBound(std::string_view labels) {
  const auto at = labels.find("le=\"");
  if (at == std::string_view::npos) return std::nullopt;
  const auto start = at + 4;
  const auto end = labels.find('"', start);
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view text = labels.substr(start, end - start);
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

template <typename Fn>
void ForEachSample(std::string_view exposition, Fn&& fn) {
  std::size_t pos = 0;
  while (pos < exposition.size()) {
    auto end = exposition.find('\n', pos);
    if (end == std::string_view::npos) end = exposition.size();
    std::string_view name, labels;
    double value = 0;
    if (SplitSample(exposition.substr(pos, end - pos), &name, &labels, &value)) {
      fn(name, labels, value);
    }
    pos = end + 1;
  }
}

boost::json::value OrNull(std::optional<double> v) {
  return v ? boost::json::value(*v) : boost::json::value(nullptr);
}

std::string Cell(std::optional<double> v, const char* format) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, *v);
  return buf;
}

}  // namespace

bool AccumulateTransfers(std::string_view exposition, TransferStats* stats) {
  bool found = false;
  const std::string time_count = std::string(kTimeMetric) + "_count";
  const std::string time_sum = std::string(kTimeMetric) + "_sum";
  const std::string bytes_sum = std::string(kBytesMetric) + "_sum";
  ForEachSample(exposition, [&](std::string_view name, std::string_view, double value) {
    if (name == time_count) {
      stats->transfers += value;
      found = true;
    } else if (name == time_sum) {
      stats->time_sum_s += value;
    } else if (name == bytes_sum) {
      stats->bytes += value;
    }
  });
  return found;
}

bool AccumulateTransferBuckets(std::string_view exposition, TransferBuckets* buckets) {
  const std::string bucket = std::string(kTimeMetric) + "_bucket";
  std::map<double, double> by_bound(buckets->time.begin(), buckets->time.end());
  bool found = false;
  ForEachSample(exposition, [&](std::string_view name, std::string_view labels, double value) {
    if (name != bucket) return;
    if (auto le = LeBound(labels)) {
      by_bound[*le] += value;  // label sets (and sims) with the same bounds add up
      found = true;
    }
  });
  buckets->time.assign(by_bound.begin(), by_bound.end());
  return found;
}

std::optional<double> BucketQuantile(const std::vector<std::pair<double, double>>& buckets,
                                     double q) {
  if (buckets.empty()) return std::nullopt;
  const double total = buckets.back().second;
  if (!(total > 0)) return std::nullopt;
  const double rank = q * total;
  double lower = 0, below = 0;
  for (const auto& [bound, cumulative] : buckets) {
    if (cumulative >= rank) {
      // In the +Inf bucket no upper bound is known: the last finite bound, as Prometheus.
      if (std::isinf(bound)) return lower;
      const double in_bucket = cumulative - below;
      if (!(in_bucket > 0)) return bound;
      return lower + (bound - lower) * (rank - below) / in_bucket;
    }
    lower = bound;
    below = cumulative;
  }
  return lower;
}

void FillTopologyRatios(std::vector<TopologyRow>& rows) {
  for (auto& r : rows) {
    const auto first = std::find_if(rows.begin(), rows.end(),
                                    [&](const TopologyRow& o) { return o.router == r.router; });
    r.goodput_ratio.assign(r.row.goodput.size(), std::nullopt);
    for (std::size_t i = 0; i < r.row.goodput.size() && i < first->row.goodput.size(); ++i) {
      const auto& a = r.row.goodput[i];
      const auto& b = first->row.goodput[i];
      if (a && b && *b > 0) r.goodput_ratio[i] = *a / *b;
    }
    const double ttft_total = r.row.ttft.mean * static_cast<double>(r.row.ttft.count);
    if (r.transfer && ttft_total > 0) {
      r.transfer_share_of_ttft = r.transfer->time_sum_s / ttft_total;
    }
  }
}

std::string TopologyTable(const std::vector<TopologyRow>& rows, double speedup) {
  std::ostringstream out;
  const std::vector<double> targets =
      rows.empty() ? std::vector<double>{} : rows.front().row.targets_tps;
  std::size_t name_width = 16;
  for (const auto& r : rows) {
    name_width = std::max(name_width, r.topology.size() + 3 + r.router.size());
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-*s %4s", static_cast<int>(name_width), "topology / router",
                "GPUs");
  out << buf;
  for (double t : targets) {
    std::snprintf(buf, sizeof buf, " %11s %6s", ("good/GPU@" + Cell(t, "%g")).c_str(), "ratio");
    out << buf;
  }
  out << "  TTFT p50/p99 s  ITL p50/p99 ms  hit GPU/CPU  xfer GB  xfer p50/p99 ms  xfer/TTFT\n";
  const auto ms = [](std::optional<double> s) {
    return s ? std::optional<double>(*s * 1e3) : std::nullopt;
  };
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "%-*s %4d", static_cast<int>(name_width),
                  (r.topology + " / " + r.router).c_str(), r.gpus);
    out << buf;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const auto g = i < r.row.goodput.size() ? r.row.goodput[i] : std::nullopt;
      const auto ratio = i < r.goodput_ratio.size() ? r.goodput_ratio[i] : std::nullopt;
      std::snprintf(buf, sizeof buf, " %11s %6s", Cell(g, "%.1f").c_str(),
                    Cell(ratio, "%.2fx").c_str());
      out << buf;
    }
    std::snprintf(buf, sizeof buf, "  %6.2f/%-7.2f  %6.1f/%-7.1f  %5s/%-5s", r.row.ttft.p50,
                  r.row.ttft.p99, r.row.itl.p50 * 1e3, r.row.itl.p99 * 1e3,
                  Cell(r.row.hit_rate, "%.2f").c_str(),
                  Cell(r.row.external_hit_rate, "%.2f").c_str());
    out << buf;
    if (r.transfer) {
      std::snprintf(buf, sizeof buf, "  %7.2f  %7s/%-7s  %9s", r.transfer->bytes / 1e9,
                    Cell(ms(r.transfer->time_p50_s), "%.1f").c_str(),
                    Cell(ms(r.transfer->time_p99_s), "%.1f").c_str(),
                    Cell(r.transfer_share_of_ttft, "%.3f").c_str());
      out << buf;
    }
    out << "\n";
  }
  out << "Goodput: Infera's tokens/s per GPU of the topology at each per-user speed (the "
         "highest level whose median ITL meets it); ratio: / the first topology under the "
         "same router. Model time (sims sped up "
      << speedup
      << "x). xfer: KV pulls the decode sims report (vllm:nixl_* histograms; percentiles "
         "from their buckets); xfer/TTFT: summed pull time / summed TTFT.\n";
  return out.str();
}

std::string TopologyJson(const std::vector<TopologyRow>& rows, double speedup) {
  boost::json::object doc;
  doc["schema"] = "kvroute.bench.topology/1";
  doc["speedup"] = speedup;
  boost::json::array items;
  for (const auto& r : rows) {
    boost::json::object o;
    o["topology"] = r.topology;
    o["router"] = r.router;
    o["gpus"] = r.gpus;
    o["requests"] = {{"sent", r.row.sent}, {"ok", r.row.ok}, {"failed", r.row.failed}};
    boost::json::array goodput;
    for (std::size_t i = 0; i < r.row.targets_tps.size(); ++i) {
      const auto g = i < r.row.goodput.size() ? r.row.goodput[i] : std::nullopt;
      goodput.push_back(
          {{"target_tokens_per_s_per_user", r.row.targets_tps[i]},
           {"tokens_per_s_per_gpu", OrNull(g)},
           {"ratio_vs_first_topology",
            OrNull(i < r.goodput_ratio.size() ? r.goodput_ratio[i] : std::nullopt)},
           {"at_concurrency", i < r.row.goodput_at.size() && r.row.goodput_at[i]
                                  ? boost::json::value(*r.row.goodput_at[i])
                                  : boost::json::value(nullptr)}});
    }
    o["goodput"] = std::move(goodput);
    o["ttft_s"] = {{"p50", r.row.ttft.p50}, {"p99", r.row.ttft.p99}, {"mean", r.row.ttft.mean}};
    o["itl_s"] = {{"p50", r.row.itl.p50}, {"p99", r.row.itl.p99}, {"mean", r.row.itl.mean}};
    o["hit_rate"] = {{"gpu", OrNull(r.row.hit_rate)}, {"cpu", OrNull(r.row.external_hit_rate)}};
    if (r.transfer) {
      o["transfer"] = {{"pulls", r.transfer->transfers},
                       {"bytes", r.transfer->bytes},
                       {"time_sum_s", r.transfer->time_sum_s},
                       {"time_p50_s", OrNull(r.transfer->time_p50_s)},
                       {"time_p99_s", OrNull(r.transfer->time_p99_s)},
                       {"share_of_ttft", OrNull(r.transfer_share_of_ttft)}};
    } else {
      o["transfer"] = nullptr;
    }
    o["stopped_after"] = r.row.stopped_after.empty() ? boost::json::value(nullptr)
                                                     : boost::json::value(r.row.stopped_after);
    items.push_back(std::move(o));
  }
  doc["rows"] = std::move(items);
  return boost::json::serialize(doc) + "\n";
}

std::expected<void, std::string> WriteTopologyFiles(const std::vector<TopologyRow>& rows,
                                                    double speedup, const std::string& dir) {
  const std::string path = dir + "/topology.json";
  std::ofstream out(path);
  out << TopologyJson(rows, speedup);
  if (!out) return std::unexpected("cannot write " + path);
  return {};
}

}  // namespace kvroute::bench
