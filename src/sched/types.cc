#include "sched/types.h"

#include <algorithm>

#include "sched/plugin.h"

namespace kvroute::sched {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kMixed:
      return "mixed";
    case Role::kPrefill:
      return "prefill";
    case Role::kDecode:
      return "decode";
  }
  return "?";
}

bool WorkerSnapshot::Serves(const std::string& model) const {
  return std::find(models.begin(), models.end(), model) != models.end();
}

std::string InputsToString(Inputs inputs) {
  static constexpr std::pair<Inputs, const char*> kNames[] = {{kCacheView, "cache_view"},
                                                              {kRouterLoad, "router_load"},
                                                              {kScrapedMetrics, "scraped_metrics"},
                                                              {kRates, "rates"}};
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if ((inputs & bit) == 0) continue;
    if (!out.empty()) out += '|';
    out += name;
  }
  return out.empty() ? "none" : out;
}

}  // namespace kvroute::sched
