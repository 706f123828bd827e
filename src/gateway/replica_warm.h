// Warming a replica's index from a live sibling before it reports ready (DESIGN "Scale beyond
// one machine"): a replica that starts late or restarts has missed the engines' earlier KV
// events, and the engines' replay holds only a bounded recent window; a sibling that has been
// running holds the full index. So at Start, before any worker subscribes, the replica asks
// each URL of `replicas.warm_from` in turn for GET /admin/index/snapshot and restores the
// first good one under its own worker ids (replica_snapshot.h); the live events that follow
// apply on top. Its own URL in the list is harmless (it does not listen yet: refused).
//
// Warming never blocks a start: no sibling answering (the first replica of a fleet, all of
// them restarting) is a warning, and the replica starts cold as before.
//
// Thread safety: WarmIndexFromSiblings is a blocking call for the starting thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/types.h"
#include "gateway/config.h"
#include "kv/index/index.h"

namespace kvroute::gateway {

struct WarmOptions {
  std::vector<std::string> siblings;  // base URLs, tried in order
  std::string api_key;                // bearer for their /admin (empty: none)
  std::chrono::milliseconds timeout{3'000};  // per sibling, the whole exchange
  // Our worker id for a sibling's worker name; workers we do not have are not restored.
  std::map<std::string, WorkerId> our_ids;
};

struct WarmResult {
  std::string sibling;            // the URL restored from
  std::size_t workers = 0;        // worker sections restored
  std::size_t image_bytes = 0;
};

// nullopt when no sibling gave a snapshot that restores (each failure is logged).
std::optional<WarmResult> WarmIndexFromSiblings(const WarmOptions& options, kv::KvIndex& index);

// Gateway::Start's step: WarmIndexFromSiblings with config.replicas, our ids being the static
// workers' (dense from 0 in `workers[]` order, the order Start joins them: fleet::RouterState
// ids) and the shared store's. Workers found later by discovery are not restored.
// REQUIRES: no worker has joined yet (nothing may apply events before the restore).
// `more_siblings` (those found in etcd) are tried after config.replicas.warm_from.
void WarmIndexBeforeJoins(const GatewayConfig& config, const std::vector<std::string>& more_siblings,
                          kv::KvIndex& index);

}  // namespace kvroute::gateway
