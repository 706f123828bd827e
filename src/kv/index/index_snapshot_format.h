// The snapshot image format (v2; v1 is still read) and its decoded records, internal to
// kv/index/: Dump writes the image (index_snapshot.cc), IndexSnapshot::Parse decodes and
// validates it (same file), and KvIndexCore::Restore / RestoreWorker apply the records
// (index_restore.cc).
//
// Image (all integers little-endian):
//
//   magic "KVRIDX\r\n" (8 bytes) | u32 version (=2) | u32 block_size | u64 keyer seed
//   u64 node_count   then per node:   u64 key | u8 has_parent | u64 parent_key
//   u64 worker_count then per worker: u32 id | u8 stale | u8 has_seq | u64 applied_seq
//       u64 hash_count  then per hash:  u64 engine_hash | u64 node_key | u32 refs
//       u64 entry_count then per entry: u64 node_key | u16 ref[4]
//   u64 XXH3_64 of every byte before it
//
// has_seq is 0 or 1; applied_seq is the engine sequence number of the last batch applied to
// the worker (KvIndex::AppliedSeq), written under the same lock as the blocks, so the image's
// blocks are exactly those of the worker's batches up to it; 0 when has_seq is 0. Version 1,
// written by the release before, is the same without has_seq and applied_seq: Parse still
// reads it (a sibling of the previous release may answer a warm start), its workers having
// no sequence. Dump writes version 2 only.
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
#include <optional>
#include <vector>

#include "common/types.h"
#include "kv/kv_event.h"

namespace kvroute::kv::index_detail {

inline constexpr char kSnapshotMagic[8] = {'K', 'V', 'R', 'I', 'D', 'X', '\r', '\n'};
inline constexpr std::uint32_t kSnapshotVersion = 2;    // what Dump writes
inline constexpr std::uint32_t kSnapshotVersionV1 = 1;  // still parsed: no applied_seq
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
  std::optional<std::uint64_t> applied_seq;  // v2's has_seq / applied_seq; none from v1
  // Every hash equals its block's key: the worker publishes kvroute's keys and is restored
  // without an engine map, as live operation keeps it (KvIndexCore::WorkerState).
  bool hashes_are_keys = true;
  std::vector<SnapshotHash> hashes;     // in image order (by hash)
  std::vector<SnapshotEntry> entries;   // in image order (by key)
};
struct SnapshotData {
  std::uint32_t version = 0;
  std::uint32_t block_size = 0;
  std::uint64_t seed = 0;
  std::vector<SnapshotNode> nodes;      // by key, unique; parents present, acyclic
  std::vector<SnapshotWorker> workers;  // by id, unique

  const SnapshotWorker* FindWorker(WorkerId id) const;
};

}  // namespace kvroute::kv::index_detail
