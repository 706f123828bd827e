// The smallest valid serve configuration, shared by the config tests. Test-only.
#pragma once

namespace kvroute::gateway::testing {

inline constexpr const char* kMinimal = R"(
workers:
  - name: a
    url: http://127.0.0.1:8001
    model: m
)";

}  // namespace kvroute::gateway::testing
