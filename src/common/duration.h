// ParseDuration: the one parser for human-written durations on command lines and in YAML
// ("120s", "500ms", "2m", "1.5" = seconds), shared by `kvroute simulate`, `kvroute bench` and
// the simulator's fleet files.
//
// Thread safety: a pure function.
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include "common/types.h"

namespace kvroute {

// Units: ns, us, ms, s, m, h; none means seconds. Spaces and tabs around the text are
// ignored. Negative, non-finite or malformed values are an error naming the text.
std::expected<Nanos, std::string> ParseDuration(std::string_view text);

}  // namespace kvroute
