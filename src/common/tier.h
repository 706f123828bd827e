// Tier: where a KV block lives, fastest first. Shared vocabulary of the index (kv/), the
// engine model (engine/) and the scheduling core (sched/), so that sched/ reads tiers without
// depending on kv/. The mapping from vLLM's `medium` strings stays in kv/kv_event.h (wire).
//
// Thread safety: plain values.
#pragma once

#include <cstdint>

namespace kvroute {

// GPU memory, host memory, local disk, a shared store (DESIGN "KV tiers"). Arrays indexed
// by tier use this order; a block held in several tiers counts at its fastest.
enum class Tier : std::uint8_t { kGpu = 0, kCpu = 1, kDisk = 2, kShared = 3 };
inline constexpr int kNumTiers = 4;

}  // namespace kvroute
