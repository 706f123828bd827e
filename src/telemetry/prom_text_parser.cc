// Line-oriented parser of the Prometheus text format. Each line is parsed on its own; a bad
// line produces one error and is skipped, so one broken exporter line never hides the rest.
#include "telemetry/prom_text_parser.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace kvroute::telemetry {
namespace {

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsLabelStart(char c) { return IsNameStart(c) && c != ':'; }
bool IsLabelChar(char c) { return IsNameChar(c) && c != ':'; }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// A cursor over one line.
struct Cursor {
  std::string_view s;
  std::size_t i = 0;
  bool done() const { return i >= s.size(); }
  char peek() const { return done() ? '\0' : s[i]; }
  void SkipBlanks() {
    while (!done() && IsBlank(s[i])) ++i;
  }
};

std::string_view ReadName(Cursor& c, bool label) {
  std::size_t start = c.i;
  if (c.done() || !(label ? IsLabelStart(c.peek()) : IsNameStart(c.peek()))) return {};
  ++c.i;
  while (!c.done() && (label ? IsLabelChar(c.peek()) : IsNameChar(c.peek()))) ++c.i;
  return c.s.substr(start, c.i - start);
}

std::string_view ReadToken(Cursor& c) {
  std::size_t start = c.i;
  while (!c.done() && !IsBlank(c.peek())) ++c.i;
  return c.s.substr(start, c.i - start);
}

// Prometheus float syntax: Go's ParseFloat plus +Inf/-Inf/NaN spellings.
std::optional<double> ParseValue(std::string_view t) {
  if (t.empty()) return std::nullopt;
  std::string_view u = t;
  bool neg = false;
  if (u.front() == '+' || u.front() == '-') {
    neg = u.front() == '-';
    u.remove_prefix(1);
  }
  auto lower_eq = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k) {
      char x = a[k];
      if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
      if (x != b[k]) return false;
    }
    return true;
  };
  if (lower_eq(u, "inf") || lower_eq(u, "infinity")) {
    return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  if (lower_eq(u, "nan")) return std::numeric_limits<double>::quiet_NaN();
  if (u.empty() || u.front() == '+' || u.front() == '-') return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(u.data(), u.data() + u.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // Overflow is a valid (huge) number: saturate like strtod.
    return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  if (ec != std::errc() || p != u.data() + u.size()) return std::nullopt;
  return neg ? -v : v;
}

std::optional<std::int64_t> ParseTimestamp(std::string_view t) {
  std::int64_t v = 0;
  const char* b = t.data();
  const char* e = t.data() + t.size();
  if (b != e && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || b == e) return std::nullopt;
  return v;
}

// Parses `{name="value",...}` at the cursor (which is on '{'). Returns an error text or "".
std::string ReadLabels(Cursor& c, std::vector<PromLabel>& out) {
  ++c.i;  // '{'
  while (true) {
    c.SkipBlanks();
    if (c.peek() == '}') {
      ++c.i;
      return {};
    }
    std::string_view name = ReadName(c, /*label=*/true);
    if (name.empty()) return "bad label name";
    c.SkipBlanks();
    if (c.peek() != '=') return "expected '=' after label name";
    ++c.i;
    c.SkipBlanks();
    if (c.peek() != '"') return "expected '\"' to open label value";
    ++c.i;
    std::string value;
    bool closed = false;
    while (!c.done()) {
      char ch = c.s[c.i++];
      if (ch == '"') {
        closed = true;
        break;
      }
      if (ch == '\\') {
        if (c.done()) break;
        char esc = c.s[c.i++];
        switch (esc) {
          case 'n':
            value.push_back('\n');
            break;
          case '\\':
            value.push_back('\\');
            break;
          case '"':
            value.push_back('"');
            break;
          default:  // unknown escape: kept verbatim, as the reference parser does
            value.push_back('\\');
            value.push_back(esc);
        }
        continue;
      }
      value.push_back(ch);
    }
    if (!closed) return "unterminated label value";
    for (const PromLabel& l : out) {
      if (l.name == name) return "duplicate label " + std::string(name);
    }
    out.push_back({std::string(name), std::move(value)});
    c.SkipBlanks();
    if (c.peek() == ',') {
      ++c.i;
      continue;
    }
    if (c.peek() == '}') {
      ++c.i;
      return {};
    }
    return "expected ',' or '}' in label set";
  }
}

std::optional<PromType> ParseType(std::string_view t) {
  if (t == "counter") return PromType::kCounter;
  if (t == "gauge") return PromType::kGauge;
  if (t == "histogram") return PromType::kHistogram;
  if (t == "summary") return PromType::kSummary;
  if (t == "untyped" || t == "unknown") return PromType::kUntyped;
  return std::nullopt;
}

// `# TYPE name type` / `# HELP name text`; other comments are ignored.
std::string ParseComment(std::string_view line, PromScrape& out) {
  Cursor c{line, 1};
  c.SkipBlanks();
  std::string_view keyword = ReadToken(c);
  if (keyword != "TYPE" && keyword != "HELP") return {};
  c.SkipBlanks();
  std::string_view name = ReadName(c, /*label=*/false);
  if (name.empty()) return "bad metric name in # " + std::string(keyword);
  if (!c.done() && !IsBlank(c.peek())) return "bad metric name in # " + std::string(keyword);
  c.SkipBlanks();
  std::string_view rest = line.substr(c.i);
  while (!rest.empty() && IsBlank(rest.back())) rest.remove_suffix(1);
  if (keyword == "TYPE") {
    auto type = ParseType(rest);
    if (!type) return "unknown metric type '" + std::string(rest.substr(0, 32)) + "'";
    out.types[std::string(name)] = *type;
    return {};
  }
  std::string text;
  for (std::size_t k = 0; k < rest.size(); ++k) {
    if (rest[k] == '\\' && k + 1 < rest.size() && (rest[k + 1] == 'n' || rest[k + 1] == '\\')) {
      text.push_back(rest[k + 1] == 'n' ? '\n' : '\\');
      ++k;
    } else {
      text.push_back(rest[k]);
    }
  }
  out.help[std::string(name)] = std::move(text);
  return {};
}

std::string ParseSample(std::string_view line, PromSample& out) {
  Cursor c{line, 0};
  c.SkipBlanks();
  std::string_view name = ReadName(c, /*label=*/false);
  if (name.empty()) return "bad metric name";
  out.name = std::string(name);
  std::size_t after_name = c.i;
  c.SkipBlanks();
  bool blank_before_value = c.i > after_name;
  if (c.peek() == '{') {
    std::string err = ReadLabels(c, out.labels);
    if (!err.empty()) return err;
    blank_before_value = !c.done() && IsBlank(c.peek());
  }
  if (!blank_before_value) return "expected a blank before the value";
  c.SkipBlanks();
  std::string_view value_text = ReadToken(c);
  auto value = ParseValue(value_text);
  if (!value) return "bad value '" + std::string(value_text.substr(0, 32)) + "'";
  out.value = *value;
  c.SkipBlanks();
  if (!c.done()) {
    std::string_view ts_text = ReadToken(c);
    auto ts = ParseTimestamp(ts_text);
    if (!ts) return "bad timestamp '" + std::string(ts_text.substr(0, 32)) + "'";
    out.timestamp_ms = *ts;
    c.SkipBlanks();
    if (!c.done()) return "trailing characters after the timestamp";
  }
  return {};
}

void AddError(PromScrape& out, std::size_t line, std::string message) {
  if (out.errors.size() >= kMaxErrors) {
    ++out.errors_dropped;
    return;
  }
  out.errors.push_back({line, std::move(message)});
}

std::string_view StripSuffix(std::string_view name, std::string_view suffix) {
  if (name.size() > suffix.size() && name.ends_with(suffix)) {
    return name.substr(0, name.size() - suffix.size());
  }
  return {};
}

}  // namespace

const char* PromTypeName(PromType type) {
  switch (type) {
    case PromType::kCounter:
      return "counter";
    case PromType::kGauge:
      return "gauge";
    case PromType::kHistogram:
      return "histogram";
    case PromType::kSummary:
      return "summary";
    case PromType::kUntyped:
      break;
  }
  return "untyped";
}

const std::string* PromSample::Label(std::string_view label_name) const {
  for (const PromLabel& l : labels) {
    if (l.name == label_name) return &l.value;
  }
  return nullptr;
}

PromType PromScrape::TypeOf(std::string_view sample_name) const {
  if (auto it = types.find(sample_name); it != types.end()) return it->second;
  for (std::string_view suffix : {"_total", "_created", "_bucket", "_sum", "_count"}) {
    std::string_view base = StripSuffix(sample_name, suffix);
    if (base.empty()) continue;
    if (auto it = types.find(base); it != types.end()) return it->second;
  }
  return PromType::kUntyped;
}

std::vector<const PromSample*> PromScrape::Find(std::string_view sample_name) const {
  std::vector<const PromSample*> found;
  for (const PromSample& s : samples) {
    if (s.name == sample_name) found.push_back(&s);
  }
  return found;
}

const PromSample* PromScrape::First(std::string_view sample_name) const {
  for (const PromSample& s : samples) {
    if (s.name == sample_name) return &s;
  }
  return nullptr;
}

std::optional<double> PromScrape::Sum(std::string_view sample_name) const {
  std::optional<double> sum;
  for (const PromSample& s : samples) {
    if (s.name == sample_name) sum = sum.value_or(0) + s.value;
  }
  return sum;
}

PromScrape ParsePromText(std::string_view text) {
  PromScrape out;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t first = 0;
    while (first < line.size() && IsBlank(line[first])) ++first;
    line.remove_prefix(first);
    if (line.empty()) continue;
    if (line.front() == '#') {
      std::string err = ParseComment(line, out);
      if (!err.empty()) AddError(out, line_no, std::move(err));
      continue;
    }
    PromSample sample;
    std::string err = ParseSample(line, sample);
    if (!err.empty()) {
      AddError(out, line_no, std::move(err));
      continue;
    }
    out.samples.push_back(std::move(sample));
  }
  return out;
}

}  // namespace kvroute::telemetry
