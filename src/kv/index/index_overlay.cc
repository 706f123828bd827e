#include "kv/index/index_overlay.h"

#include <algorithm>
#include <unordered_map>

namespace kvroute::kv {

void MergePredicted(std::span<const PredictedMatch> predicted, std::vector<WorkerMatch>* matches) {
  if (predicted.empty()) return;
  std::unordered_map<WorkerId, std::size_t> at;
  at.reserve(matches->size());
  for (std::size_t i = 0; i < matches->size(); ++i) at.emplace((*matches)[i].worker, i);
  // A predicted block is on the GPU, so it counts for every tier's depth (a tier's depth
  // counts blocks in it or a faster one, WorkerMatch).
  for (const PredictedMatch& p : predicted) {
    auto it = at.find(p.worker);
    if (it == at.end()) {
      WorkerMatch m;
      m.worker = p.worker;
      m.depth.fill(p.depth);
      m.any_depth = p.depth;
      matches->push_back(m);
      continue;
    }
    WorkerMatch& m = (*matches)[it->second];
    for (std::uint32_t& d : m.depth) d = std::max(d, p.depth);
    m.any_depth = std::max(m.any_depth, p.depth);
  }
}

std::vector<WorkerMatch> LookupWithPredictions(const KvIndex& index,
                                               const PredictedBlocks& predicted,
                                               std::span<const BlockKey> keys, Nanos now) {
  std::vector<WorkerMatch> matches = index.Lookup(keys);
  std::vector<PredictedMatch> p = predicted.Lookup(keys, now);
  MergePredicted(p, &matches);
  return matches;
}

}  // namespace kvroute::kv
