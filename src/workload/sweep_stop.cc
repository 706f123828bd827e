#include "workload/sweep_stop.h"

#include <cstdio>

namespace kvroute::workload {

std::optional<SweepStop> SweepStopAfter(const std::string& level_name, const Summary& itl,
                                        double threshold_s) {
  if (threshold_s <= 0 || itl.count == 0 || !(itl.mean > threshold_s)) return std::nullopt;
  return SweepStop{.after_level = level_name, .mean_itl_s = itl.mean, .skipped = {}};
}

std::string SweepStopNote(const SweepStop& stop, double threshold_s) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "sweep stopped after %s: mean ITL %.1f ms > %.1f ms (Infera's rule)",
                stop.after_level.c_str(), stop.mean_itl_s * 1e3, threshold_s * 1e3);
  std::string out = buf;
  if (!stop.skipped.empty()) {
    out += "; not run:";
    for (std::size_t i = 0; i < stop.skipped.size(); ++i) {
      out += (i == 0 ? " c=" : ", c=") + std::to_string(stop.skipped[i]);
    }
  }
  return out;
}

}  // namespace kvroute::workload
