// PeerPools: per engine profile, the sample-weighted pool of its workers' learned rates — the
// prior a worker's snapshot borrows while it has few samples of its own (DESIGN §5: learned,
// not hand-set, and identical workers must not look different by sampling noise alone).
//
//   prefill  a worker with < min_samples prefill samples gets its peers' pooled rate (the
//            sample-weighted harmonic mean over the peers with >= min_samples); one with
//            more, its own rate shrunk toward the pool (ShrinkTowardPeers, worth
//            prefill_prior_samples samples).
//   decode   a worker with < min_samples decode samples is lent the sample-weighted mean
//            decode model of its peers with >= min_samples; otherwise it keeps its own.
// Why (issues 5/6): an unused worker's estimate sits at its profile's seed while a used
// peer's follows what was measured; when the seed is off (a sim at --speedup 10) the used
// worker looked 10x faster or slower than every idle one and predicted_ttft sent it every
// new session. Shrinkage: identical workers' estimates scatter up to 1.4x on a few dozen
// samples each (Mooncake trace, 8 workers), which predicted_ttft read as speed.
//
// The pool is kept incrementally: a worker's contribution is replaced (subtracted, then the
// new one added) when RouterState calls Update — at the seed, at each first token (the one
// call that adds a prefill sample) and at each completion (the request's decode samples) —
// so a snapshot of 1,000 workers reads each pool in O(1). Decode samples grow per token;
// refreshing per request is enough to cross min_samples within a request or two and keeps
// the per-token path free of pool updates.
//
// Thread safety: none; RouterState guards it with its table lock.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"
#include "fleet/rate_learner.h"
#include "sched/types.h"

namespace kvroute::fleet {

struct PeerPriorOptions {
  bool enabled = true;
  // Samples of its own (prefill and decode counted apart) a worker needs to stand on its own
  // and to count in its pool. Default: the learner's prior weight, below which the seed
  // dominates.
  double min_samples = 10;
  // Past min_samples, the pool still counts as this many samples toward a worker's prefill
  // rate (0: none). 100: in kvroute simulate (Mooncake trace, 8 and 64 workers, arrivals
  // x1.5..x4) mean SLO attainment 0.278 -> 0.308; 300 gave 0.309, full pooling 0.298.
  double prefill_prior_samples = 100;
};

class PeerPools {
 public:
  explicit PeerPools(PeerPriorOptions options = {});

  // A new worker of `profile` (contributes nothing until Update). Ids are dense-ish
  // (RouterState's), never reused.
  void Join(WorkerId worker, std::string_view profile);
  // Withdraws the worker's contribution (it was removed).
  void Leave(WorkerId worker);
  // Replaces the worker's contribution by what `estimate` (its current one) says.
  void Update(WorkerId worker, const RateEstimate& estimate);

  // Writes the worker's prefill rate (own, pooled or shrunk) into `s` and, when it is lent
  // its peers' decode model, that model; returns whether it was lent (otherwise the caller
  // writes the worker's own decode model). Nothing for a worker never joined.
  bool Apply(WorkerId worker, sched::WorkerSnapshot* s) const;

 private:
  struct Pool {  // sums over the members with >= min_samples samples (each kind apart)
    double weight = 0;
    double s_per_token = 0;  // weighted sum of 1 / rate
    double decode_weight = 0;
    sched::StepTimeModel decode;  // weighted sums of the decode coefficients
  };
  struct Own {  // a worker's last estimate and its shares of its pool
    bool joined = false;
    std::size_t pool = 0;
    double rate = 0;
    double attention_q = 0;  // the prefill curve's shape (RateEstimate::attention_q)
    double samples = 0;
    double weight = 0;
    double s_per_token = 0;
    double decode_samples = 0;
    double decode_weight = 0;
    sched::StepTimeModel decode;  // its decode model times decode_weight
  };
  void Withdraw(Own& own);

  const PeerPriorOptions options_;
  const double min_samples_;
  std::vector<std::string> pool_names_;  // profile per pool
  std::vector<Pool> pools_;
  std::vector<Own> own_;  // by worker id
};

}  // namespace kvroute::fleet
