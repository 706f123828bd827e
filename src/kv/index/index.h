// KvIndex: the global KV block index. For each canonical block key (kv::BlockKey) it knows
// which workers hold the block, in which tiers (GPU, CPU, DISK, SHARED), fed by the engines'
// own KV events (kv::KvEventBatch, vLLM format). A lookup takes a prompt's chain of block keys
// and returns, for every worker holding block 0, its consecutive prefix depth per tier —
// counting a block held in that tier or a faster one — and over "any tier": matching stops at
// the worker's FIRST missing block (exact, never skipping holes). See kv/README.md section "Index" for the design, the proof that the jump search is
// exact, and the memory layout. This header is the API; the implementation is KvIndexCore
// (kv/index/index_core.h, internal to kv/index/), to which every call is forwarded.
//
// Dual keys: engines name blocks by their own hashes (EngineHash), which kvroute cannot
// reproduce in general. Each worker keeps a map EngineHash -> canonical node, built from the
// token ids and extra keys carried by BlockStored:
//   key_i = keyer.Next(parent_key, tokens_of_block_i, extra_keys_i),
//   parent_key = key mapped from parent_block_hash, or keyer.Root() for block 0,
// with the extra keys derived by kv::EventExtraKeys: the event's own extra_keys (LoRA name,
// multimodal items, cache_salt on block 0 — the request path's rule, so a salted, adapter or
// image request's keys equal its blocks'), or, from an event without them, only its LoRA
// name. Such an event cannot say whether block 0 was salted, so once the router has sent the
// worker a salted request (MarkSaltedTraffic) a run from block 0 without extra_keys is not
// indexed (counted `unattributed_*`): no request is ever credited with a salted tenant's
// block, and its later blocks stay out too (their parent is unknown). A worker whose engine
// hashes all equal these keys (an engine hashing as kvroute does) keeps no map: its hashes
// resolve through the node table, checked block by block, with an exact fallback to the map.
//
// Ownership: owns all index state; the BlockKeyer is copied in.
// Thread safety: every public method may be called from any thread concurrently. Writers
// (ApplyBatch, RemoveWorker, MarkStale, ClearStale, Restore, RestoreWorker) take an exclusive
// lock per call; readers (Lookup, counters, AppliedSeq, Dump) a shared one. ApplyBatch keys
// its token blocks before the exclusive lock (parents read under a shared one, checked again
// under the exclusive one), so batches of different workers applied from several threads key
// in parallel; a batch's sequence number is recorded under the same exclusive lock as its
// events. The caller preserves per-worker event order (one subscriber thread per worker, or
// one for all).
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"
#include "kv/keys/block_key.h"
#include "kv/kv_event.h"

namespace kvroute::kv {

class KvIndexCore;    // the layout and the algorithms (kv/index/index_core.h, internal)
class IndexSnapshot;  // a parsed Dump() image (kv/index/index_snapshot.h)

// One worker's match for a prompt.
struct WorkerMatch {
  WorkerId worker = 0;
  // Consecutive prefix depth in blocks, per tier (indexed by Tier), where a block counts for
  // tier t if tier t OR A FASTER ONE holds it (common/tier.h's order): non-decreasing in t,
  // so depth[t] - depth[t-1] blocks are read from tier t at best. Engines copy a block to the
  // host when the GPU evicts it, so a host tier alone rarely holds block 0: its own run would
  // be empty while it holds the blocks right after the GPU's prefix.
  std::array<std::uint32_t, kNumTiers> depth{};
  // Consecutive prefix depth where each block may be in any tier (>= every depth[t]; equal to
  // depth[SHARED] for the index's own matches).
  std::uint32_t any_depth = 0;
  // The worker was marked stale (events lost or lagging): the scheduler should down-weight.
  bool stale = false;
  bool operator==(const WorkerMatch&) const = default;
};

// Why events were not applied. All monotonically increasing since construction.
struct IndexCounters {
  std::uint64_t batches = 0;
  std::uint64_t blocks_stored = 0;          // block stores applied (duplicates included)
  std::uint64_t blocks_removed = 0;         // block removals applied
  std::uint64_t clears = 0;                 // AllBlocksCleared applied
  std::uint64_t unknown_removals = 0;       // removal of a hash (or tier) the worker does not hold
  std::uint64_t unknown_parent_runs = 0;    // BlockStored whose parent hash was unknown: skipped
  std::uint64_t unknown_parent_blocks = 0;  // blocks in those runs
  std::uint64_t unknown_medium = 0;         // events whose medium is not a known tier: skipped
  std::uint64_t ignored_group = 0;          // events of a non-main KV cache group: skipped
  std::uint64_t block_size_mismatch = 0;    // BlockStored whose block_size != keyer's: skipped
  std::uint64_t malformed = 0;              // token count != blocks * block_size: skipped
  std::uint64_t hash_conflicts = 0;         // engine hash already mapped to a different key
  std::uint64_t ref_overflow = 0;           // > 255 copies of one block in one tier: ignored
  // Runs from block 0 whose event cannot say whether they were salted (no extra_keys), on a
  // worker that was sent salted requests: not indexed (see the file comment).
  std::uint64_t unattributed_runs = 0;
  std::uint64_t unattributed_blocks = 0;
  std::uint64_t extra_keys_mismatch = 0;  // extra_keys count != blocks: skipped
  // Batches whose sequence number was at or below the worker's applied one (a replay of what
  // the index holds already, e.g. from a snapshot): skipped whole, so no copy counts twice.
  std::uint64_t duplicate_batches = 0;
  // Last block size seen in a BlockStored (0 = none yet); the parity check compares it with
  // the keyer's to report a mismatch instead of silently matching nothing.
  std::uint32_t last_event_block_size = 0;
};

// Sizes for memory reporting.
struct IndexStats {
  std::size_t workers = 0;
  std::size_t nodes = 0;          // distinct canonical blocks
  std::size_t entries = 0;        // (block, worker) pairs with at least one tier held
  std::size_t engine_hashes = 0;  // engine-hash mappings over all workers
};

class KvIndex {
 public:
  explicit KvIndex(const BlockKeyer& keyer);
  KvIndex(const KvIndex&) = delete;
  KvIndex& operator=(const KvIndex&) = delete;
  ~KvIndex();

  const BlockKeyer& keyer() const;

  // Applies one batch of `worker`'s events in order. Creates the worker on first use.
  void ApplyBatch(WorkerId worker, const KvEventBatch& batch);
  // The same for a batch that came with its engine's sequence number (the KV-event feed).
  // The worker's applied sequence becomes `seq` under the same exclusive lock as the events,
  // so a Dump's blocks and sequence always agree. A batch with seq <= the applied sequence is
  // already in the index (a replay over a snapshot): skipped and counted
  // (`duplicate_batches`). An engine restart (its counter starts again) must be a
  // RemoveWorker first, as the feed does.
  void ApplyBatch(WorkerId worker, const KvEventBatch& batch, std::uint64_t seq);
  // The sequence number of the last batch applied to `worker` with one (above, or carried by
  // Restore / RestoreWorker from a snapshot); nullopt if none since the worker was created or
  // removed. A subscriber started for a worker the index holds resumes after it.
  std::optional<std::uint64_t> AppliedSeq(WorkerId worker) const;
  void ApplyEvent(WorkerId worker, const KvEvent& event);

  // Each worker holding keys[0] in some tier, with its depths. Order unspecified. Workers not
  // listed have depth 0 everywhere. `keys` must be one prompt's chain (keys[i + 1] keyed from
  // keys[i], as BlockKeyer produces them): the search skips positions whose ends agree, so a
  // foreign key spliced into the middle of a chain is not noticed.
  std::vector<WorkerMatch> Lookup(std::span<const BlockKey> keys) const;

  // Forgets everything about `worker` (it left, or it will be resynced from scratch).
  void RemoveWorker(WorkerId worker);

  // Staleness: the worker's entries stay, but lookups flag them until ClearStale, an
  // AllBlocksCleared from the worker, or RemoveWorker.
  void MarkStale(WorkerId worker);
  void ClearStale(WorkerId worker);

  // The router sent `worker` a request with a cache_salt: from now on (until RemoveWorker)
  // its runs from block 0 that carry no extra_keys are not indexed, since they might be
  // salted. Cheap when already marked (a shared lock); call it before forwarding.
  void MarkSaltedTraffic(WorkerId worker);

  IndexCounters counters() const;
  IndexStats stats() const;

  // Snapshot: a binary, versioned, checksummed image of the whole index (kv/README.md
  // "Snapshot format"); equal contents give byte-equal images. Restore replaces the contents
  // only if the image is intact and consistent; otherwise it returns an error and leaves the
  // index unchanged.
  std::string Dump() const;
  std::expected<void, std::string> Restore(std::string_view image);
  // Merges worker `from` of a parsed image into this live index as worker `target` (a
  // replica warming a worker that joined after its start), leaving every other worker as it
  // is. Refused, with the index unchanged, if `target` already holds blocks or has an applied
  // sequence (live events are never overwritten), `from` is not in the image, the keyer
  // differs, or a block the worker needs exists here under another parent. Returns the blocks
  // (entries) merged. Carries the worker's stale flag, engine-hash map (or keyed mode) and
  // applied sequence (AppliedSeq, from a v2 image), not MarkSaltedTraffic.
  std::expected<std::size_t, std::string> RestoreWorker(const IndexSnapshot& snapshot,
                                                        WorkerId from, WorkerId target);

 private:
  std::unique_ptr<KvIndexCore> core_;
};

}  // namespace kvroute::kv
