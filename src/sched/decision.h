// The result of one scheduling decision and its reasons: the chosen worker (or none, and
// why), and for every candidate its filter outcome, each scorer's cost, the weighted total,
// the picker's probability and the predicted TTFT/ITL where the policy computes them. Enough
// for a /debug/route endpoint and structured logs; the gateway renders it as JSON, tests use
// RenderDecision.
//
// Thread safety: plain values. Owns all its strings (it may outlive the Policy).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/types.h"

namespace kvroute::sched {

struct CandidateTrace {
  WorkerId worker = 0;
  std::string name;
  bool cache_stale = false;               // the caller's cache view was marked stale
  std::optional<std::string> dropped_by;  // filter that removed it; nullopt = survived
  std::string drop_reason;
  std::vector<double> costs;               // raw cost per scorer (Decision::scorers order)
  std::optional<double> total_cost;        // sum of weight * cost, survivors only
  std::optional<double> probability;       // when the picker samples
  std::optional<double> predicted_ttft_s;  // when the policy reads rates and the worker has them
  // The queue-dependent part of predicted_ttft_s (queue, decode interference, KV wait, with the
  // worker's wait correction applied): what the caller's calibration compares with the
  // measured wait (fleet::LoadTracker).
  std::optional<double> predicted_wait_s;
  std::optional<double> predicted_itl_s;
};

struct ScorerTrace {
  std::string name;
  double weight = 0;
};

struct Decision {
  std::string policy;
  std::optional<WorkerId> chosen;
  std::string why_none;            // set when chosen is nullopt
  std::vector<std::string> notes;  // e.g. a soft filter skipped because it dropped all
  std::vector<ScorerTrace> scorers;
  std::string picker;
  // Every worker in the snapshot, snapshot order (TraceDetail::kFull); with kChosenOnly only
  // the chosen worker's entry (empty when none was chosen).
  std::vector<CandidateTrace> candidates;

  const CandidateTrace* Find(WorkerId worker) const;
};

// Multi-line human-readable text, stable for tests and logs.
std::string RenderDecision(const Decision& decision);

}  // namespace kvroute::sched
