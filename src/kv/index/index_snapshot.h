// IndexSnapshot: a KvIndex::Dump() image, validated and decoded once, from which whole
// indexes (KvIndex::Restore) or single workers (KvIndex::RestoreWorker) are restored. A router
// replica that warms from a sibling parses the sibling's image once at start and merges each
// worker into its live index when that worker joins (gateway/replica_warm.h), possibly seconds
// later and in any order.
//
// Parse checks everything Restore always checked, before anything is kept: magic, version
// (2, or 1 from the release before: no applied sequences), block size and key seed (against
// the keyer given), XXH3 checksum, counts bounded by the bytes left, every node's parent
// present and parent links acyclic, no duplicate node, worker or engine hash, every entry's
// per-tier counts <= 255 and equal to its hashes' counts, has_seq 0 or 1. A
// parsed snapshot is therefore internally consistent; what is left to check at a merge is its
// agreement with the live index it goes into (KvIndex::RestoreWorker).
//
// Ownership: immutable once parsed; copies share the decoded records (a shared_ptr), so the
// snapshot can be kept by one owner and read by several threads.
// Thread safety: every const method from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"
#include "kv/keys/block_key.h"

namespace kvroute::kv {

namespace index_detail {
struct SnapshotData;  // the decoded records (kv/index/index_snapshot_format.h, internal)
}

class IndexSnapshot {
 public:
  // An error (naming what is wrong) unless `image` is intact, consistent, and keyed with
  // `keyer`'s block size and seed.
  static std::expected<IndexSnapshot, std::string> Parse(std::string_view image,
                                                         const BlockKeyer& keyer);

  // The workers the image holds a section for, ascending.
  std::vector<WorkerId> workers() const;
  bool has_worker(WorkerId worker) const;
  // Blocks `worker` holds in some tier (its entries); 0 for a worker not in the image.
  std::size_t entries(WorkerId worker) const;
  // The engine sequence number of the last batch in `worker`'s section (KvIndex::AppliedSeq
  // at Dump): its blocks are exactly those of the worker's batches up to it. nullopt for a
  // worker not in the image, one whose batches came without one, or a v1 image.
  std::optional<std::uint64_t> applied_seq(WorkerId worker) const;
  // The image's format version (2, or 1 from the release before: no applied sequences).
  std::uint32_t version() const;
  std::size_t nodes() const;
  std::uint32_t block_size() const;
  std::uint64_t seed() const;

 private:
  friend class KvIndexCore;
  explicit IndexSnapshot(std::shared_ptr<const index_detail::SnapshotData> data)
      : data_(std::move(data)) {}
  std::shared_ptr<const index_detail::SnapshotData> data_;
};

}  // namespace kvroute::kv
