#include "simulate/router_load.h"

#include "engine/step_time.h"

namespace kvroute::simulate {

RouterLoad::RouterLoad(gateway::RateLearnerOptions options)
    : learner_(options), tracker_(&learner_) {}

std::expected<void, std::string> RouterLoad::AddWorker(WorkerId worker,
                                                       const engine::Profile& profile,
                                                       std::uint32_t block_size) {
  auto seed = gateway::SeedFromProfile(profile);
  if (!seed) return std::unexpected(seed.error());
  learner_.Seed(worker, *seed);
  if (dirty_.size() <= worker) {
    dirty_.resize(worker + 1, 1);
    kv_bytes_per_block_.resize(worker + 1, 0);
  }
  // As WorkerRegistry::Add: the profile's KV bytes per token (all ranks) x block size.
  kv_bytes_per_block_[worker] =
      engine::StepTimeModel(profile).KvBytesPerTokenTransfer() * block_size;
  dirty_[worker] = 1;
  return {};
}

void RouterLoad::ForgetWorker(WorkerId worker) {
  tracker_.ForgetWorker(worker);
  Touch(worker);
}

void RouterLoad::OnRouted(std::uint64_t request, const gateway::RoutedRequest& routed, Nanos now) {
  tracker_.OnRouted(request, routed, now);
  Touch(routed.worker);
}

void RouterLoad::OnFirstToken(std::uint64_t request, WorkerId worker, Nanos now) {
  tracker_.OnFirstToken(request, now);
  Touch(worker);
}

void RouterLoad::OnToken(std::uint64_t request, WorkerId worker, Nanos now) {
  tracker_.OnToken(request, now, 1);
  Touch(worker);  // the decode estimate may have moved
}

void RouterLoad::OnDone(std::uint64_t request, WorkerId worker, Nanos now, bool ok) {
  tracker_.OnDone(request, now, ok);
  Touch(worker);
}

void RouterLoad::Fill(WorkerId worker, sched::WorkerSnapshot* s) {
  if (worker >= dirty_.size() || dirty_[worker] == 0) return;
  dirty_[worker] = 0;
  // As WorkerRegistry::Snapshot.
  const gateway::WorkerLoad l = tracker_.Load(worker);
  s->inflight_requests = l.inflight_requests;
  s->pending_prefill_tokens = l.pending_prefill_tokens;
  s->active_kv_blocks = l.active_kv_blocks;
  if (auto r = learner_.Estimate(worker)) {
    s->prefill_tokens_per_s = r->prefill_tokens_per_s;
    s->decode_step = r->decode;
  }
  s->kv_bytes_per_block = kv_bytes_per_block_[worker];
}

}  // namespace kvroute::simulate
