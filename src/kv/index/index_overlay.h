// Predict-on-route overlay: one lookup over the event index and kvroute's own recent routing
// decisions (kv/index/approx_predicted.h), max-merged per worker. A prediction says "this worker
// will hold these blocks on GPU once it has run the request", so it raises the GPU depth, and
// with it every slower tier's (a tier's depth counts blocks in it or a faster one, WorkerMatch)
// and the any-tier depth; the stale flag comes from the event index only.
//
// Thread safety: as safe as the two structures it reads (both are); the two views are read
// one after the other, not atomically together, which is acceptable for a routing hint.
#pragma once

#include <span>
#include <vector>

#include "kv/index/approx_predicted.h"
#include "kv/index/index.h"

namespace kvroute::kv {

// Max-merges `predicted` into `matches` in place (adding workers only predicted).
void MergePredicted(std::span<const PredictedMatch> predicted, std::vector<WorkerMatch>* matches);

std::vector<WorkerMatch> LookupWithPredictions(const KvIndex& index,
                                               const PredictedBlocks& predicted,
                                               std::span<const BlockKey> keys, Nanos now);

}  // namespace kvroute::kv
