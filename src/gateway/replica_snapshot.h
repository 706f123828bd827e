// A sibling replica's index snapshot on the wire, and the one change a replica makes to it
// before restoring: worker ids. Every replica holds the full index (each subscribes to every
// engine's KV events), but worker ids are each replica's own (the order its workers joined),
// so the snapshot travels with the sibling's id → name table and is restored under ours.
//
// Envelope (GET /admin/index/snapshot, application/octet-stream):
//   one line of JSON  {"format": "kvroute-index-snapshot", "workers": [{"id": 0, "name":
//                     "w0"}, ...], "image_bytes": N}  then "\n"
//   N bytes           KvIndex::Dump() (kv/index/index_snapshot.cc: magic, version, block
//                     size, key seed, nodes, workers, XXH3 checksum)
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"

namespace kvroute::gateway {

// The shared KV store's entry in the worker table (it is no worker, but the index holds its
// blocks under sched::kSharedStoreWorker on every replica).
inline constexpr std::string_view kSharedStoreSnapshotName = "<kv_store>";

struct SnapshotWorker {
  WorkerId id = 0;
  std::string name;
};

struct SiblingSnapshot {
  std::vector<SnapshotWorker> workers;
  std::string image;
};

std::string EncodeSiblingSnapshot(const std::vector<SnapshotWorker>& workers,
                                  std::string_view image);
std::expected<SiblingSnapshot, std::string> DecodeSiblingSnapshot(std::string_view body);

// The image with each worker's id replaced by `ids[id]`; workers without an entry in `ids`
// are dropped (their blocks come back from their engines' events). The checksum is
// recomputed. An error when the image's framing is broken (KvIndex::Restore checks the rest).
std::expected<std::string, std::string> RemapSnapshotWorkers(
    std::string_view image, const std::map<WorkerId, WorkerId>& ids);

}  // namespace kvroute::gateway
