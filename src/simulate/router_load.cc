#include "simulate/router_load.h"

#include <algorithm>

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
    own_.resize(worker + 1);
  }
  // As WorkerRegistry::Add: the profile's KV bytes per token (all ranks) x block size.
  kv_bytes_per_block_[worker] =
      engine::StepTimeModel(profile).KvBytesPerTokenTransfer() * block_size;
  dirty_[worker] = 1;
  // Peer pool of this profile (a re-added worker first leaves its old pool).
  Own& own = own_[worker];
  if (own.weight > 0 || own.decode_weight > 0) {
    Pool& old = pools_[own.pool];
    old.weight -= own.weight;
    old.s_per_token -= own.s_per_token;
    old.decode_weight -= own.decode_weight;
    old.decode.base_s -= own.decode.base_s;
    old.decode.per_sequence_s -= own.decode.per_sequence_s;
    old.decode.per_kv_token_s -= own.decode.per_kv_token_s;
  }
  auto it = std::find(pool_names_.begin(), pool_names_.end(), profile.name);
  if (it == pool_names_.end()) {
    pool_names_.push_back(profile.name);
    pools_.emplace_back();
    it = pool_names_.end() - 1;
  }
  own = Own{.pool = static_cast<std::size_t>(it - pool_names_.begin())};
  UpdateRates(worker);
  return {};
}

void RouterLoad::UpdateRates(WorkerId worker) {
  auto e = learner_.Estimate(worker);
  if (!e || worker >= own_.size()) return;
  Own& own = own_[worker];
  Pool& pool = pools_[own.pool];
  pool.weight -= own.weight;
  pool.s_per_token -= own.s_per_token;
  own.rate = e->prefill_tokens_per_s;
  own.attention_q = e->attention_q;
  own.samples = static_cast<double>(e->prefill_samples);
  // As WorkerRegistry's PeerPool: only workers with enough samples of their own contribute.
  const bool contributes = own.samples >= kPeerMinSamples && own.rate > 0;
  own.weight = contributes ? own.samples : 0;
  own.s_per_token = contributes ? own.samples / own.rate : 0;
  pool.weight += own.weight;
  pool.s_per_token += own.s_per_token;

  pool.decode_weight -= own.decode_weight;
  pool.decode.base_s -= own.decode.base_s;
  pool.decode.per_sequence_s -= own.decode.per_sequence_s;
  pool.decode.per_kv_token_s -= own.decode.per_kv_token_s;
  own.decode_samples = static_cast<double>(e->decode_samples);
  own.decode_weight = own.decode_samples >= kPeerMinSamples ? own.decode_samples : 0;
  own.decode = sched::StepTimeModel{e->decode.base_s * own.decode_weight,
                                    e->decode.per_sequence_s * own.decode_weight,
                                    e->decode.per_kv_token_s * own.decode_weight};
  pool.decode_weight += own.decode_weight;
  pool.decode.base_s += own.decode.base_s;
  pool.decode.per_sequence_s += own.decode.per_sequence_s;
  pool.decode.per_kv_token_s += own.decode.per_kv_token_s;
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
  UpdateRates(worker);  // the one call that adds a prefill sample
  Touch(worker);
}

void RouterLoad::OnToken(std::uint64_t request, WorkerId worker, Nanos now) {
  tracker_.OnToken(request, now, 1);
  Touch(worker);  // the decode estimate may have moved
}

void RouterLoad::OnDone(std::uint64_t request, WorkerId worker, Nanos now, bool ok) {
  tracker_.OnDone(request, now, ok);
  UpdateRates(worker);  // the request's decode samples, for the decode pool
  Touch(worker);
}

void RouterLoad::Fill(WorkerId worker, Nanos now, sched::WorkerSnapshot* s) {
  if (worker >= dirty_.size()) return;
  // As WorkerRegistry::Snapshot: the learned correction, raised while a request is overdue.
  s->wait_correction = tracker_.WaitCorrection(worker, now);
  // As WorkerRegistry::Snapshot's peer prior; every call, since a peer's sample moves it.
  const Own& own = own_[worker];
  const Pool& pool = pools_[own.pool];
  s->prefill_attention_per_token = own.attention_q;
  if (own.rate > 0) {
    if (pool.weight > 0 && pool.s_per_token > 0) {
      const double peer_rate = pool.weight / pool.s_per_token;
      s->prefill_tokens_per_s =
          own.samples < kPeerMinSamples
              ? peer_rate
              : gateway::ShrinkTowardPeers(own.rate, own.samples, peer_rate, kPeerPriorSamples);
    } else {
      s->prefill_tokens_per_s = own.rate;
    }
  }
  // As WorkerRegistry::Snapshot: too few decode samples of its own, its peers' model.
  const bool lend_decode = own.decode_samples < kPeerMinSamples && pool.decode_weight > 0;
  if (lend_decode) {
    // The pool is kept by adding and subtracting: rounding can leave a coefficient a hair
    // below zero where every member's is zero.
    s->decode_step = sched::StepTimeModel{std::max(0.0, pool.decode.base_s / pool.decode_weight),
                                          std::max(0.0, pool.decode.per_sequence_s / pool.decode_weight),
                                          std::max(0.0, pool.decode.per_kv_token_s / pool.decode_weight)};
  }
  if (dirty_[worker] == 0) return;
  dirty_[worker] = 0;
  // As WorkerRegistry::Snapshot.
  const gateway::WorkerLoad l = tracker_.Load(worker);
  s->inflight_requests = l.inflight_requests;
  s->pending_prefill_tokens = l.pending_prefill_tokens;
  s->active_kv_blocks = l.active_kv_blocks;
  if (!lend_decode) {
    if (auto r = learner_.Estimate(worker)) s->decode_step = r->decode;
  }
  s->kv_bytes_per_block = kv_bytes_per_block_[worker];
}

}  // namespace kvroute::simulate
