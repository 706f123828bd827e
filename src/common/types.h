// Basic vocabulary types shared by every module.
//
// Thread safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kvroute {

// A token id as the model's vocabulary numbers it. Vocabularies are < 2^31.
using TokenId = std::uint32_t;

// Simulated and real durations are kept in nanoseconds everywhere; conversions to seconds
// happen only at the edges (wire formats, metrics, reports).
using Nanos = std::chrono::nanoseconds;

inline double ToSeconds(Nanos d) { return std::chrono::duration<double>(d).count(); }
inline Nanos FromSeconds(double s) {
  return std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(s));
}

// Identifies a worker (model server) inside kvroute. Dense, assigned by fleet::RouterState.
using WorkerId = std::uint32_t;

// Identifies a routed request inside one router (its bookings, parity samples); not the
// client's x-request-id.
using RequestId = std::uint64_t;

}  // namespace kvroute
