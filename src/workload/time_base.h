// The time base of bench reports. With sims running `speedup` (S) times faster than real
// time, everything the client measures in a run is model time / S: a 33 ms inter-token gap of
// the modelled GPU arrives 33/S ms apart on the wire. Reports (and every SLO judged on them)
// are in MODEL time: ScaleToModelTime multiplies every measured duration of a level by S once,
// when the level ends, so summaries, throughputs (tokens / duration, hence divided by S),
// Infera and DistServe goodput and the per-request CSV all read model time with no further
// conversion. Against real engines S = 1 and nothing changes.
//
// The convention is printed in every report header (TimeBaseNote) and recorded in the run
// JSON ("time_base").
//
// Caveat the note also states: routers and the client run in real time, so the wall time a
// proxy adds is multiplied by S too; at high S proxy overhead weighs S times more than it
// would in front of real engines.
//
// Thread safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include "workload/report.h"

namespace kvroute::workload {

// Multiplies the level's duration and every request's start, TTFT, E2E and ITL gaps by
// `speedup`. REQUIRES: speedup > 0. speedup == 1 leaves the level unchanged.
void ScaleToModelTime(LevelResult& level, double speedup);

// Open-loop send times: a workload's arrivals are in model seconds (a --rates R level offers R
// requests per model second, a trace keeps its own clock); the client schedules sends in wall
// seconds, so each is divided by `speedup`. REQUIRES: speedup > 0.
std::vector<double> ToWallTime(std::vector<double> model_arrivals_s, double speedup);

// One line for report headers: "times are model time = wall x 20 (sims at --speedup 20); ..."
// or, for speedup 1, "times are wall clock (speedup 1)".
std::string TimeBaseNote(double speedup);

}  // namespace kvroute::workload
