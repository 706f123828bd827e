// A sibling replica's index snapshot on the wire. Every replica holds the full index (each
// subscribes to every engine's KV events), but worker ids are each replica's own (the order its
// workers joined), so the snapshot travels with the sibling's id → name table, and each worker
// is merged under our id for its name (replica_warm.h, kv::KvIndex::RestoreWorker).
//
// Envelope (GET /admin/index/snapshot, application/octet-stream):
//   one line of JSON  {"format": "kvroute-index-snapshot", "workers": [{"id": 0, "name":
//                     "w0"}, ...], "image_bytes": N}  then "\n"
//   N bytes           KvIndex::Dump() (kv/index/index_snapshot_format.h: magic, version 2,
//                     block size, key seed, nodes, workers with their applied event
//                     sequence, XXH3 checksum; a v1 image, without sequences, is still read)
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <expected>
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

}  // namespace kvroute::gateway
