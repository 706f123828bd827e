// Plug-in contracts of the scheduling core: Filter, Scorer, Picker, and the per-caller
// PolicyState they may draw randomness and round-robin position from.
//
// The host (Policy::Decide, policy.h) enforces every contract written here; a plug-in that
// breaks one produces a SchedError naming it, never a silent wrong decision.
//
// Ownership: plug-ins are built once by the registry and owned by an immutable Policy
// through shared_ptr<const T>. Thread safety: every method is const and must not mutate
// any state (no mutable members, no globals): one Policy is shared by all threads. The only
// mutable scheduling state is PolicyState, owned by the caller (one per thread / simulator).
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sched/types.h"

namespace kvroute::sched {

// The inputs a plug-in reads, so the caller computes (index lookups, scrapes) only those.
// A bit set; Policy::RequiredInputs() is the union over its plug-ins.
using Inputs = std::uint32_t;
inline constexpr Inputs kNoInputs = 0;
inline constexpr Inputs kCacheView = 1u << 0;       // RequestProfile::cache_views
inline constexpr Inputs kRouterLoad = 1u << 1;      // WorkerSnapshot router-side load fields
inline constexpr Inputs kScrapedMetrics = 1u << 2;  // WorkerSnapshot::scraped
inline constexpr Inputs kRates = 1u << 3;           // learned rates and bandwidths
std::string InputsToString(Inputs inputs);          // "cache_view|rates"

// A worker as plug-ins see it: the snapshot plus its cache view for this request (all-zero
// when the caller gave none). Pointers valid for the duration of one Decide call.
struct Candidate {
  const WorkerSnapshot* worker = nullptr;
  CacheView cache;
};

struct SchedError {
  enum class Code {
    kInvalidCost,     // a scorer returned NaN/inf or the wrong number of costs
    kMissingInput,    // a plug-in needs a rate the snapshot does not have
    kContract,        // a filter or picker broke its contract (wrong sizes, bad index)
    kInvalidRequest,  // the profile itself is unusable (block_size 0, ...)
  };
  Code code;
  std::string message;  // names the plug-in and, where relevant, the worker
};

// Mutable state a caller owns and passes to Policy::Decide: the seeded generator (the only
// randomness in sched/) and the round-robin cursor. Not thread-safe: one per caller thread.
// Deterministic: the same seed and the same calls give the same decisions.
class PolicyState {
 public:
  explicit PolicyState(std::uint64_t seed) : rng_(seed) {}
  // Uniform in [0, 1), 53 random bits; independent of the standard library's
  // distributions so simulator runs reproduce across toolchains.
  double Uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n). REQUIRES: n > 0.
  std::size_t UniformIndex(std::size_t n) {
    auto i = static_cast<std::size_t>(Uniform01() * static_cast<double>(n));
    return i < n ? i : n - 1;
  }
  std::optional<WorkerId> last_round_robin;  // worker picked by the last round-robin pick

 private:
  std::mt19937_64 rng_;
};

// Filter: keeps or drops each candidate, with a reason.
// Contract:
//  - Apply returns exactly one verdict per candidate, in the same order.
//  - Filters run in the order the policy declares; each sees only survivors of the earlier
//    ones. The order among candidates is unspecified: a verdict must depend only on that
//    candidate, the request and (for set-relative rules) the set as a whole, never on its
//    position.
//  - What happens when a filter would drop every candidate is the host's rule, set per
//    filter in the policy (IfAllDropped in policy.h), not the filter's.
//  - An error (e.g. a missing rate) aborts the decision.
struct FilterVerdict {
  bool keep = true;
  std::string reason;  // why dropped (empty when kept)
};
class Filter {
 public:
  virtual ~Filter() = default;
  virtual std::string_view Name() const = 0;
  virtual Inputs Needs() const = 0;
  virtual std::expected<std::vector<FilterVerdict>, SchedError> Apply(
      const RequestProfile& request, std::span<const Candidate> candidates) const = 0;
  // The same keep/drop verdicts as Apply, without building reason strings: for callers that
  // show no reasons (TraceDetail::kChosenOnly, e.g. kvroute simulate deciding over 1,000
  // workers a million times). Fills `keep` with one flag per candidate (1 = keep). The
  // default calls Apply; filters override it when formatting reasons costs.
  virtual std::expected<void, SchedError> Keep(const RequestProfile& request,
                                               std::span<const Candidate> candidates,
                                               std::vector<char>* keep) const;
};

// Scorer: one cost contribution per candidate, lower is better.
// Contract:
//  - Returns exactly one finite cost per candidate, same order; NaN/inf or a wrong count is
//    an error naming the scorer (the host checks).
//  - May normalise across the candidate set (min-max), but must not depend on row order.
//  - The host multiplies the cost by the weight the policy gives this scorer and sums.
//  - No side effects.
class Scorer {
 public:
  virtual ~Scorer() = default;
  virtual std::string_view Name() const = 0;
  virtual Inputs Needs() const = 0;
  virtual std::expected<std::vector<double>, SchedError> Score(
      const RequestProfile& request, std::span<const Candidate> candidates) const = 0;
};

// One row the picker chooses among: a surviving candidate and its weighted total cost.
struct PickRow {
  WorkerId worker = 0;
  double total_cost = 0;  // finite (the host checks before picking)
};
struct PickResult {
  std::size_t row = 0;                // index into the rows passed in
  std::vector<double> probabilities;  // per row, when the picker samples; else empty
};
// Picker: chooses one row.
// Contract:
//  - rows is non-empty; the result's row index is < rows.size() (the host checks).
//  - Must not rely on row order: equal inputs in any order give the same worker for the
//    same PolicyState (pickers order rows by worker id before drawing).
//  - Randomness only from PolicyState.
class Picker {
 public:
  virtual ~Picker() = default;
  virtual std::string_view Name() const = 0;
  virtual std::expected<PickResult, SchedError> Pick(std::span<const PickRow> rows,
                                                     PolicyState& state) const = 0;
};

}  // namespace kvroute::sched
