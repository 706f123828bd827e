#include "common/duration.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <utility>

namespace kvroute {

std::expected<Nanos, std::string> ParseDuration(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  double scale = 1e9;
  const std::pair<std::string_view, double> units[] = {{"ns", 1},  {"us", 1e3}, {"ms", 1e6},
                                                       {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
  for (const auto& [suffix, s] : units) {
    // "ms" must not be read as "m" + "s": a unit only counts when a digit or '.' precedes it.
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      const char c = text[text.size() - suffix.size() - 1];
      if ((c >= '0' && c <= '9') || c == '.') {
        text.remove_suffix(suffix.size());
        scale = s;
        break;
      }
    }
  }
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v) || v < 0) {
    return std::unexpected("bad duration '" + std::string(text) + "' (e.g. 120s, 500ms, 2m)");
  }
  return Nanos(static_cast<std::int64_t>(std::llround(v * scale)));
}

}  // namespace kvroute
