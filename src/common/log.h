// Logging setup. Every module logs through spdlog's default logger; this file only
// configures it once at process start (level, pattern) so output looks the same in every
// subcommand.
//
// Thread safety: InitLogging must be called once, before other threads start.
#pragma once

#include <string>
#include <string_view>

namespace kvroute {

// level: trace|debug|info|warn|error|off. Returns false (and keeps "info") when unknown.
bool InitLogging(std::string_view level, std::string_view process_name);

}  // namespace kvroute
