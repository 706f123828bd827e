// The `workers[]` part of GatewayConfig, kept out of config.cc: one worker's mapping and
// the list's rules (URL, unique name, models, role, P/D fields). Internal to the
// configuration's .cc files. Thread safety: pure functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <expected>
#include <string>
#include <vector>

#include "gateway/config.h"

namespace kvroute::gateway {

// One entry of workers[] at `path` (e.g. "workers[2]"); unknown keys are errors naming it.
std::expected<WorkerConfig, std::string> ParseWorker(const YAML::Node& node, std::string path);
// Every worker: a parseable url, a unique name, at least one model, a known role, valid
// P/D fields.
std::expected<void, std::string> ValidateWorkers(const std::vector<WorkerConfig>& workers);

}  // namespace kvroute::gateway
