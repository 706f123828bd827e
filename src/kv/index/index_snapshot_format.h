// The snapshot image format (v1) and its decoded records, internal to kv/index/: Dump writes
// the image (index_snapshot.cc), IndexSnapshot::Parse decodes and validates it (same file), and
// KvIndexCore::Restore / RestoreWorker apply the records (index_restore.cc).
//
// Image (all integers little-endian):
//
//   magic "KVRIDX\r\n" (8 bytes) | u32 version (=1) | u32 block_size | u64 keyer seed
//   u64 node_count   then per node:   u64 key | u8 has_parent | u64 parent_key
//   u64 worker_count then per worker: u32 id | u8 stale
//       u64 hash_count  then per hash:  u64 engine_hash | u64 node_key | u32 refs
//       u64 entry_count then per entry: u64 node_key | u16 ref[4]
//   u64 XXH3_64 of every byte before it
//
// Dump writes every record sorted (nodes by key, workers by id, hashes by hash, entries by
// key), so equal contents give equal bytes. Derived state (kids counters, holes, child counts,
// depths, lane counts) is not in the image: restoring rebuilds it by the code paths that keep
// it live, so an image cannot carry inconsistent derived state. Counters are not saved.
//
// Decoded: nodes sorted by key, parents and every record's node as positions in that array
// (so applying needs no key lookups inside the image), workers sorted by id.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "common/types.h"
#include "kv/kv_event.h"

namespace kvroute::kv::index_detail {

inline constexpr char kSnapshotMagic[8] = {'K', 'V', 'R', 'I', 'D', 'X', '\r', '\n'};
inline constexpr std::uint32_t kSnapshotVersion = 1;
inline constexpr std::uint32_t kNoSnapshotNode = 0xFFFFFFFFu;

struct SnapshotNode {
  BlockKey key = 0;
  std::uint32_t parent = kNoSnapshotNode;  // position of the parent node, or none (block 0)
};
struct SnapshotHash {
  EngineHash hash = 0;
  std::uint32_t node = 0;  // position in SnapshotData::nodes
  std::uint32_t refs = 0;  // > 0
};
struct SnapshotEntry {
  std::uint32_t node = 0;  // position in SnapshotData::nodes
  std::array<std::uint8_t, kNumTiers> ref{};  // copies per tier, some > 0
};
struct SnapshotWorker {
  WorkerId id = 0;
  bool stale = false;
  // Every hash equals its block's key: the worker publishes kvroute's keys and is restored
  // without an engine map, as live operation keeps it (KvIndexCore::WorkerState).
  bool hashes_are_keys = true;
  std::vector<SnapshotHash> hashes;     // in image order (by hash)
  std::vector<SnapshotEntry> entries;   // in image order (by key)
};
struct SnapshotData {
  std::uint32_t block_size = 0;
  std::uint64_t seed = 0;
  std::vector<SnapshotNode> nodes;      // by key, unique; parents present, acyclic
  std::vector<SnapshotWorker> workers;  // by id, unique

  const SnapshotWorker* FindWorker(WorkerId id) const;
};

}  // namespace kvroute::kv::index_detail
