#include "workload/time_base.h"

#include <cassert>
#include <cstdio>

namespace kvroute::workload {

void ScaleToModelTime(LevelResult& level, double speedup) {
  assert(speedup > 0);
  if (speedup == 1) return;
  level.duration_s *= speedup;
  for (RequestRecord& rec : level.requests) {
    RequestResult& r = rec.result;
    r.start_s *= speedup;
    r.ttft_s *= speedup;
    r.e2e_s *= speedup;
    for (double& gap : r.itl_s) gap *= speedup;
  }
}

std::string TimeBaseNote(double speedup) {
  if (speedup == 1) return "times are wall clock (speedup 1)";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "times are model time = wall x %g (sims at --speedup %g); rates are per model "
                "second; SLOs are judged in model time",
                speedup, speedup);
  return buf;
}

std::vector<double> ToWallTime(std::vector<double> model_arrivals_s, double speedup) {
  for (double& t : model_arrivals_s) t /= speedup;
  return model_arrivals_s;
}

}  // namespace kvroute::workload
