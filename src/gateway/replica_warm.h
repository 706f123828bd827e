// Warming a replica's index from a live sibling (DESIGN "Scale beyond one machine"): a replica
// that starts late or restarts has missed the engines' earlier KV events, and the engines'
// replay holds only a bounded recent window; a sibling that has been running holds the full
// index. So at Start, before any worker subscribes, the replica asks each URL of
// `replicas.warm_from` (then those found in etcd) in turn for GET /admin/index/snapshot and
// keeps the first that parses (replica_snapshot.h: the image plus the sibling's id → name
// table). Each worker is then merged into the live index under its own id when it joins
// (Gateway::Parts::Join, after the router-state add and before its KV subscriber starts;
// kv::KvIndex::RestoreWorker), whether it is static or found later by discovery: ids are each
// replica's own, names are what replicas agree on. The shared store's section is merged at once.
// A merge carries the worker's applied event sequence S (snapshot v2): the worker's subscriber,
// started right after (KvFeed::AddWorker reads kv::KvIndex::AppliedSeq), repairs its first gap
// from S + 1, and the index skips any replayed batch <= S, so no merged block counts twice.
//
// Lifetime: the snapshot ages while it is kept (its worker's engine goes on evicting), so it
// is kept `replicas.warm_keep_s` after Start's static joins (the clock starts at Arm), and
// dropped earlier once every worker it names has been merged. A worker that joins after that,
// or one whose name was merged once already (a worker that left and came back: its cache may
// be another now), starts cold and fills from its engine's events and replay as before.
// A worker without a KV-event endpoint is never merged: nothing would ever correct its blocks.
//
// Warming never blocks a start: no sibling answering (the first replica of a fleet, all of
// them restarting) is a warning, and the replica starts cold as before.
//
// Thread safety: FetchSiblingSnapshot is a blocking call for the starting thread. A
// KeptSiblingSnapshot's methods may be called from any thread (one mutex; MergeWorker holds it
// while the index merges, and the index never calls back); its expiry thread only drops.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/types.h"
#include "gateway/config.h"
#include "kv/index/index.h"
#include "kv/index/index_snapshot.h"

namespace kvroute::gateway {

struct WarmOptions {
  std::vector<std::string> siblings;  // base URLs, tried in order
  std::string api_key;                // bearer for their /admin (empty: none)
  std::chrono::milliseconds timeout{3'000};  // per sibling, the whole exchange
};

// A sibling's snapshot, parsed (so validated against our keyer) and named.
struct FetchedSnapshot {
  std::string sibling;                   // the URL it came from
  std::map<std::string, WorkerId> ids;   // the sibling's worker id for each name
  std::optional<kv::IndexSnapshot> snapshot;  // always set when returned
  std::size_t image_bytes = 0;
};

// nullopt when no sibling gave a snapshot that parses (each failure is logged).
std::optional<FetchedSnapshot> FetchSiblingSnapshot(const WarmOptions& options,
                                                    const kv::BlockKeyer& keyer);

// What MergeWorker did for one join.
enum class WarmMerge {
  kMerged,      // the worker's blocks are in the index under its id
  kNotNamed,    // the snapshot has no worker of that name (a new worker): nothing to do
  kTooLate,     // named, but the snapshot was dropped (warm_keep_s passed) or this name was
                // merged once already: the worker starts cold
  kRefused,     // the index refused (the id holds blocks already, or the snapshot disagrees
                // with the index): logged, the worker starts cold
};

struct WarmCounters {
  std::size_t merged_workers = 0;
  std::size_t merged_blocks = 0;
  std::size_t with_seq = 0;  // merged workers whose section carried an applied sequence
  std::size_t too_late = 0;
  std::size_t refused = 0;
  bool kept = false;  // the snapshot is still held
};

class KeptSiblingSnapshot {
 public:
  // `keep`: how long after Arm() the snapshot is held for joins (0: dropped at Arm).
  KeptSiblingSnapshot(FetchedSnapshot fetched, std::chrono::milliseconds keep);
  ~KeptSiblingSnapshot();  // stops the expiry thread
  KeptSiblingSnapshot(const KeptSiblingSnapshot&) = delete;
  KeptSiblingSnapshot& operator=(const KeptSiblingSnapshot&) = delete;

  // Merges the sibling's worker `name` into `index` as `id` (at most once per name).
  // REQUIRES: `id` receives no KV events yet (its subscriber starts after this returns).
  WarmMerge MergeWorker(std::string_view name, WorkerId id, kv::KvIndex& index);
  // Start's static joins are done: the keep window starts now.
  void Arm();
  WarmCounters counters() const;
  const std::string& sibling() const { return sibling_; }

 private:
  void DropLocked();  // frees the snapshot; names stay, to tell "too late" from "not named"
  void ExpireAfter(std::chrono::milliseconds keep);

  const std::string sibling_;
  const std::chrono::milliseconds keep_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, WorkerId> ids_;          // guarded by mu_ (never shrinks)
  std::optional<kv::IndexSnapshot> snapshot_;    // guarded by mu_; nullopt once dropped
  std::set<std::string, std::less<>> merged_;    // guarded by mu_: names merged or tried
  WarmCounters counters_;                        // guarded by mu_
  bool stop_ = false;                            // guarded by mu_
  std::thread expiry_;
};

// Gateway::Start's step: FetchSiblingSnapshot with config.replicas (`more_siblings`, those
// found in etcd, after warm_from), the shared store's section merged into `index` at once;
// the rest is kept for Parts::Join. nullptr when there are no siblings or none answered.
// REQUIRES: no worker has joined yet.
std::unique_ptr<KeptSiblingSnapshot> WarmIndexBeforeJoins(
    const GatewayConfig& config, const std::vector<std::string>& more_siblings,
    kv::KvIndex& index);

}  // namespace kvroute::gateway
