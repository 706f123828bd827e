// ParityChecker: does the engine confirm the blocks kvroute predicted? (DESIGN §4)
//
// On route the gateway records (worker, the request's block keys). From the request's first
// token on, the engine has stored those blocks and its events should show them: each Check()
// asks the index (through `lookup`) how deep the worker's consecutive prefix of those keys
// is now; a sample is final when every block is confirmed or `window` after the first token
// has passed. Exported: predicted and confirmed block totals, their ratio.
//
// When, over the last `min_samples` final samples, confirmed/predicted stays below
// `warn_ratio`, Check() returns ONE warning naming the likely cause (re-armed only after the
// ratio recovers). CheckAll() judges the same way per worker too (each worker's own last
// `min_samples` samples, its own arming), with the worker's own event feed as evidence, so a
// single misconfigured engine among healthy ones is named even when the global ratio is fine:
//   kBlockSizeMismatch  the events carry a block size different from our keyer's
//   kNoEvents           the index has received no event batch since the checker started
//   kTokenizerMismatch  events arrive and blocks are stored, but not even the first block of
//                       our prompts ever matches: tokenizer, chat template or hash seed differ
//   kEvictionPressure   otherwise: blocks match at first and are then evicted before we look
//
// Pure: no clock, no index access of its own (lookup and counters are passed in).
// Thread safety: every method takes one internal mutex; `lookup` is called under it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/types.h"
#include "kv/keys/block_key.h"

namespace kvroute::gateway {

enum class ParityCause : std::uint8_t {
  kBlockSizeMismatch,
  kNoEvents,
  kTokenizerMismatch,
  kEvictionPressure,
};
const char* ParityCauseName(ParityCause cause);

struct ParityOptions {
  Nanos window = std::chrono::seconds(5);  // how long after first token to wait for events
  double warn_ratio = 0.5;                 // warn below this confirmed/predicted ratio
  std::size_t min_samples = 50;            // final samples the ratio is judged over
  std::size_t max_pending = 100'000;       // bound on tracked requests; oldest dropped
  // A request with no first token by then (failed, cancelled, never reported) is dropped.
  Nanos max_wait_first_token = std::chrono::minutes(10);
};

// What the checker needs to know about the index (kv::IndexCounters + keyer).
struct ParityIndexView {
  std::uint32_t keyer_block_size = 0;
  std::uint32_t last_event_block_size = 0;  // 0: no BlockStored seen yet
  std::uint64_t batches = 0;                // event batches applied
  std::uint64_t blocks_stored = 0;
};

struct ParityWarning {
  std::optional<WorkerId> worker;  // set for a per-worker warning
  ParityCause cause = ParityCause::kEvictionPressure;
  double ratio = 0;         // confirmed/predicted over the judged samples
  std::size_t samples = 0;  // how many
  std::string message;      // one line for the log, naming the cause and what to check
};

struct ParityCounters {
  std::uint64_t samples = 0;           // final samples
  std::uint64_t predicted_blocks = 0;  // over final samples
  std::uint64_t confirmed_blocks = 0;
  std::uint64_t first_block_confirmed = 0;  // samples whose block 0 was confirmed
  std::uint64_t dropped = 0;                // requests dropped (no first token, over bound)
  std::uint64_t warnings = 0;
  double ratio() const {
    return predicted_blocks == 0 ? 1.0 : static_cast<double>(confirmed_blocks) / predicted_blocks;
  }
};

// What one Check finds: the global warning and the per-worker ones (each at most once per
// episode of low ratio).
struct ParityReport {
  std::optional<ParityWarning> global;
  std::vector<ParityWarning> workers;
};

class ParityChecker {
 public:
  // Consecutive prefix depth (any tier) of `keys` on `worker` in the event index.
  using LookupFn = std::function<std::uint32_t(WorkerId, std::span<const kv::BlockKey>)>;
  // One worker's own event evidence: its batches and stored blocks since the feed started
  // (counted from 0) and the block size of its last BlockStored.
  using WorkerViewFn = std::function<ParityIndexView(WorkerId)>;

  // `initial` is the index as it was when the checker started (for "no events at all").
  explicit ParityChecker(ParityOptions options = {}, ParityIndexView initial = {});

  // A request with no full block is not tracked.
  void OnRouted(RequestId id, WorkerId worker, std::vector<kv::BlockKey> keys, Nanos now);
  void OnFirstToken(RequestId id, Nanos now);
  // A failed request never confirms anything: drop it. Successful ones stay until final.
  void OnFailed(RequestId id);

  // Confirms what it can, finalises due samples, and may return the one global warning.
  std::optional<ParityWarning> Check(Nanos now, const LookupFn& lookup,
                                     const ParityIndexView& index);
  // The same, and judges every worker with final samples against `worker_view`.
  ParityReport CheckAll(Nanos now, const LookupFn& lookup, const ParityIndexView& index,
                        const WorkerViewFn& worker_view);

  ParityCounters counters() const;
  // Per worker that has final samples (samples, blocks, warnings: that worker's own).
  std::map<WorkerId, ParityCounters> WorkerCounters() const;

 private:
  struct Pending {
    WorkerId worker = 0;
    std::vector<kv::BlockKey> keys;
    Nanos routed_at{0};
    std::optional<Nanos> first_token_at;
    std::uint32_t best_depth = 0;  // deepest confirmation seen
  };
  struct Final {
    std::uint32_t predicted = 0;
    std::uint32_t confirmed = 0;
  };
  // The samples one judgement is over (all workers, or one), and its warning state.
  struct Window {
    std::deque<Final> recent;  // last min_samples final samples
    ParityCounters counters;
    bool armed = true;  // a warning may be issued
  };
  void AddLocked(Window& w, Final f) const;
  // The warning `w` gives now, if any. `baseline`: the evidence before the checker started.
  std::optional<ParityWarning> JudgeLocked(Window& w, const ParityIndexView& index,
                                           const ParityIndexView& baseline) const;
  void ConfirmLocked(Nanos now, const LookupFn& lookup);

  const ParityOptions options_;
  const ParityIndexView initial_;
  mutable std::mutex mu_;
  std::unordered_map<RequestId, Pending> pending_;  // guarded by mu_
  std::deque<RequestId> order_;                     // route order, for the bound
  Window all_;                                      // every worker's samples
  std::map<WorkerId, Window> per_worker_;           // guarded by mu_
  std::uint64_t dropped_ = 0;
};

}  // namespace kvroute::gateway
