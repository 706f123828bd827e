#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace kvroute {

bool InitLogging(std::string_view level, std::string_view process_name) {
  auto logger = spdlog::stderr_color_mt(std::string(process_name));
  spdlog::set_default_logger(logger);
  // Timestamps in UTC with milliseconds; the process name tells sims apart in a shared log.
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ [%n] %v", spdlog::pattern_time_type::utc);
  auto parsed = spdlog::level::from_str(std::string(level));
  bool known = parsed != spdlog::level::off || level == "off";
  spdlog::set_level(known ? parsed : spdlog::level::info);
  return known;
}

}  // namespace kvroute
