// KvIndex: the public face of the index; each call is forwarded to KvIndexCore
// (kv/index/index_core.h), which holds the layout, the lock and the algorithms.
#include "kv/index/index.h"

#include "kv/index/index_core.h"

namespace kvroute::kv {

KvIndex::KvIndex(const BlockKeyer& keyer) : core_(std::make_unique<KvIndexCore>(keyer)) {}
KvIndex::~KvIndex() = default;

const BlockKeyer& KvIndex::keyer() const { return core_->keyer(); }
void KvIndex::ApplyBatch(WorkerId worker, const KvEventBatch& batch) {
  core_->ApplyBatch(worker, batch);
}
void KvIndex::ApplyBatch(WorkerId worker, const KvEventBatch& batch, std::uint64_t seq) {
  core_->ApplyBatch(worker, batch, seq);
}
std::optional<std::uint64_t> KvIndex::AppliedSeq(WorkerId worker) const {
  return core_->AppliedSeq(worker);
}
void KvIndex::ApplyEvent(WorkerId worker, const KvEvent& event) {
  core_->ApplyEvent(worker, event);
}
std::vector<WorkerMatch> KvIndex::Lookup(std::span<const BlockKey> keys) const {
  return core_->Lookup(keys);
}
void KvIndex::RemoveWorker(WorkerId worker) { core_->RemoveWorker(worker); }
void KvIndex::MarkStale(WorkerId worker) { core_->MarkStale(worker); }
void KvIndex::ClearStale(WorkerId worker) { core_->ClearStale(worker); }
void KvIndex::MarkSaltedTraffic(WorkerId worker) { core_->MarkSaltedTraffic(worker); }
IndexCounters KvIndex::counters() const { return core_->counters(); }
IndexStats KvIndex::stats() const { return core_->stats(); }
std::string KvIndex::Dump() const { return core_->Dump(); }
std::expected<void, std::string> KvIndex::Restore(std::string_view image) {
  return core_->Restore(image);
}
std::expected<std::size_t, std::string> KvIndex::RestoreWorker(const IndexSnapshot& snapshot,
                                                               WorkerId from, WorkerId target) {
  return core_->RestoreWorker(snapshot, from, target);
}

}  // namespace kvroute::kv
