#include "workload/trace.h"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>

namespace kvroute::workload {
namespace {

constexpr std::uint32_t kMooncakeBlockTokens = 512;

std::string LineError(std::size_t line, const std::string& what) {
  return "line " + std::to_string(line) + ": " + what;
}

// Reads a JSON number that must be a non-negative integer fitting in T.
template <typename T>
bool GetCount(const boost::json::object& obj, std::string_view key, T* out) {
  const auto* v = obj.if_contains(key);
  if (v == nullptr) return false;
  if (v->is_uint64()) {
    if (v->as_uint64() > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(v->as_uint64());
    return true;
  }
  if (v->is_int64()) {
    if (v->as_int64() < 0 || static_cast<std::uint64_t>(v->as_int64()) > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(v->as_int64());
    return true;
  }
  return false;
}

bool IsBlank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

template <typename T>
bool ParseInt(std::string_view s, T* out) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

std::expected<Trace, std::string> ParseMooncakeJsonl(std::istream& in) {
  Trace trace;
  trace.hash_block_tokens = kMooncakeBlockTokens;
  std::string line;
  std::size_t line_no = 0;
  double first_ms = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (IsBlank(line)) continue;
    boost::system::error_code ec;
    boost::json::value value = boost::json::parse(line, ec);
    if (ec) return std::unexpected(LineError(line_no, "not valid JSON (" + ec.message() + ")"));
    if (!value.is_object()) return std::unexpected(LineError(line_no, "expected a JSON object"));
    const auto& obj = value.as_object();
    TraceRequest req;
    std::uint64_t timestamp_ms = 0;
    if (!GetCount(obj, "timestamp", &timestamp_ms)) {
      return std::unexpected(LineError(line_no, "timestamp must be a non-negative integer (ms)"));
    }
    if (!GetCount(obj, "input_length", &req.input_tokens)) {
      return std::unexpected(LineError(line_no, "input_length must be a non-negative integer"));
    }
    if (!GetCount(obj, "output_length", &req.output_tokens)) {
      return std::unexpected(LineError(line_no, "output_length must be a non-negative integer"));
    }
    const auto* ids = obj.if_contains("hash_ids");
    if (ids == nullptr || !ids->is_array()) {
      return std::unexpected(LineError(line_no, "hash_ids must be an array of integers"));
    }
    for (const auto& id : ids->as_array()) {
      if (id.is_uint64()) {
        req.hash_ids.push_back(id.as_uint64());
      } else if (id.is_int64() && id.as_int64() >= 0) {
        req.hash_ids.push_back(static_cast<std::uint64_t>(id.as_int64()));
      } else {
        return std::unexpected(LineError(line_no, "hash_ids must be an array of non-negative integers"));
      }
    }
    const std::uint64_t blocks_needed = (std::uint64_t{req.input_tokens} + kMooncakeBlockTokens - 1) / kMooncakeBlockTokens;
    if (req.hash_ids.size() < blocks_needed) {
      // Some generators write input_length // 512 ids; the tail then has no id and is unique.
      // More ids than blocks, however, cannot be expanded consistently.
    } else if (req.hash_ids.size() > blocks_needed) {
      return std::unexpected(LineError(line_no, "more hash_ids than 512-token blocks in input_length"));
    }
    if (trace.requests.empty()) first_ms = static_cast<double>(timestamp_ms);
    req.arrival_s = (static_cast<double>(timestamp_ms) - first_ms) / 1000.0;
    trace.requests.push_back(std::move(req));
  }
  if (in.bad()) return std::unexpected("read error");
  std::stable_sort(trace.requests.begin(), trace.requests.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_s < b.arrival_s; });
  if (!trace.requests.empty()) {
    const double t0 = trace.requests.front().arrival_s;
    for (auto& r : trace.requests) r.arrival_s -= t0;
  }
  return trace;
}

std::expected<double, std::string> ParseAzureTimestamp(std::string_view text) {
  // YYYY-MM-DD HH:MM:SS[.fffffff]
  if (text.size() < 19 || text[4] != '-' || text[7] != '-' || (text[10] != ' ' && text[10] != 'T') ||
      text[13] != ':' || text[16] != ':') {
    return std::unexpected("timestamp is not YYYY-MM-DD HH:MM:SS[.fraction]");
  }
  int year, month, day, hour, minute, second;
  if (!ParseInt(text.substr(0, 4), &year) || !ParseInt(text.substr(5, 2), &month) ||
      !ParseInt(text.substr(8, 2), &day) || !ParseInt(text.substr(11, 2), &hour) ||
      !ParseInt(text.substr(14, 2), &minute) || !ParseInt(text.substr(17, 2), &second)) {
    return std::unexpected("timestamp has a non-numeric field");
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::unexpected("timestamp field out of range");
  }
  double fraction = 0;
  std::string_view rest = text.substr(19);
  if (!rest.empty()) {
    if (rest.front() != '.') return std::unexpected("unexpected text after seconds");
    double scale = 0.1;
    for (char c : rest.substr(1)) {
      if (c < '0' || c > '9') return std::unexpected("fraction of a second is not numeric");
      fraction += (c - '0') * scale;
      scale /= 10;
    }
  }
  using namespace std::chrono;
  const sys_days date = year_month_day{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(month)},
                                       std::chrono::day{static_cast<unsigned>(day)}};
  if (!year_month_day{date}.ok()) return std::unexpected("timestamp is not a calendar date");
  const double days_s = static_cast<double>(duration_cast<seconds>(date.time_since_epoch()).count());
  return days_s + hour * 3600.0 + minute * 60.0 + second + fraction;
}

std::expected<Trace, std::string> ParseAzureCsv(std::istream& in) {
  Trace trace;
  std::string line;
  std::size_t line_no = 0;
  int col_ts = -1, col_ctx = -1, col_gen = -1;
  double first_s = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (IsBlank(line)) continue;
    std::vector<std::string_view> cols;
    std::string_view rest = line;
    while (true) {
      auto comma = rest.find(',');
      cols.push_back(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (col_ts < 0) {  // header
      for (int i = 0; i < static_cast<int>(cols.size()); ++i) {
        if (cols[i] == "TIMESTAMP") col_ts = i;
        if (cols[i] == "ContextTokens") col_ctx = i;
        if (cols[i] == "GeneratedTokens") col_gen = i;
      }
      if (col_ts < 0 || col_ctx < 0 || col_gen < 0) {
        return std::unexpected(LineError(line_no, "header must name TIMESTAMP, ContextTokens, GeneratedTokens"));
      }
      continue;
    }
    const int needed = std::max({col_ts, col_ctx, col_gen});
    if (static_cast<int>(cols.size()) <= needed) return std::unexpected(LineError(line_no, "too few columns"));
    auto ts = ParseAzureTimestamp(cols[col_ts]);
    if (!ts) return std::unexpected(LineError(line_no, ts.error()));
    TraceRequest req;
    if (!ParseInt(cols[col_ctx], &req.input_tokens)) {
      return std::unexpected(LineError(line_no, "ContextTokens must be a non-negative integer"));
    }
    if (!ParseInt(cols[col_gen], &req.output_tokens)) {
      return std::unexpected(LineError(line_no, "GeneratedTokens must be a non-negative integer"));
    }
    if (trace.requests.empty()) first_s = *ts;
    req.arrival_s = *ts - first_s;
    trace.requests.push_back(std::move(req));
  }
  if (col_ts < 0) return std::unexpected("empty file: no header");
  std::stable_sort(trace.requests.begin(), trace.requests.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_s < b.arrival_s; });
  if (!trace.requests.empty()) {
    const double t0 = trace.requests.front().arrival_s;
    for (auto& r : trace.requests) r.arrival_s -= t0;
  }
  return trace;
}

std::expected<Trace, std::string> LoadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::unexpected("cannot open " + path);
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  std::expected<Trace, std::string> result;
  if (ends_with(".jsonl")) {
    result = ParseMooncakeJsonl(in);
  } else if (ends_with(".csv")) {
    result = ParseAzureCsv(in);
  } else {
    return std::unexpected(path + ": unknown trace format (expected .jsonl Mooncake or .csv Azure)");
  }
  if (!result) return std::unexpected(path + ": " + result.error());
  return result;
}

}  // namespace kvroute::workload
