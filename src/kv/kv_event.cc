#include "kv/kv_event.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace kvroute::kv {

std::optional<Tier> TierFromMedium(std::string_view medium) {
  std::string m(medium);
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::toupper(c); });
  if (m.empty() || m == "GPU" || m == "HBM" || m == "DEVICE") return Tier::kGpu;
  if (m == "CPU" || m == "CPU_PINNED" || m == "HOST" || m == "CPU_TIER") return Tier::kCpu;
  if (m == "DISK" || m == "NVME" || m == "SSD" || m == "DISK_TIER") return Tier::kDisk;
  if (m == "SHARED" || m == "REMOTE" || m == "EXTERNAL") return Tier::kShared;
  return std::nullopt;
}

const char* TierName(Tier tier) {
  switch (tier) {
    case Tier::kGpu: return "GPU";
    case Tier::kCpu: return "CPU";
    case Tier::kDisk: return "DISK";
    case Tier::kShared: return "SHARED";
  }
  return "?";
}

}  // namespace kvroute::kv
