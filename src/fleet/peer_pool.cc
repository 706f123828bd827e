#include "fleet/peer_pool.h"

#include <algorithm>
#include <cmath>

namespace kvroute::fleet {

PeerPools::PeerPools(PeerPriorOptions options)
    : options_(options), min_samples_(std::max(1.0, std::ceil(options.min_samples))) {}

void PeerPools::Join(WorkerId worker, std::string_view profile) {
  if (own_.size() <= worker) own_.resize(worker + 1);
  Own& own = own_[worker];
  if (own.joined) Withdraw(own);  // a re-joined worker first leaves its old pool
  auto it = std::find(pool_names_.begin(), pool_names_.end(), profile);
  if (it == pool_names_.end()) {
    pool_names_.emplace_back(profile);
    pools_.emplace_back();
    it = pool_names_.end() - 1;
  }
  own = Own{.joined = true, .pool = static_cast<std::size_t>(it - pool_names_.begin())};
}

void PeerPools::Withdraw(Own& own) {
  Pool& pool = pools_[own.pool];
  pool.weight -= own.weight;
  pool.s_per_token -= own.s_per_token;
  pool.decode_weight -= own.decode_weight;
  pool.decode.base_s -= own.decode.base_s;
  pool.decode.per_sequence_s -= own.decode.per_sequence_s;
  pool.decode.per_kv_token_s -= own.decode.per_kv_token_s;
}

void PeerPools::Leave(WorkerId worker) {
  if (worker >= own_.size() || !own_[worker].joined) return;
  Withdraw(own_[worker]);
  own_[worker] = Own{};
}

void PeerPools::Update(WorkerId worker, const RateEstimate& e) {
  if (worker >= own_.size() || !own_[worker].joined) return;
  Own& own = own_[worker];
  Pool& pool = pools_[own.pool];
  // The order of these sums is part of the results: kvroute simulate's outputs are compared
  // digit for digit across changes (docs/bench/router-state.md).
  pool.weight -= own.weight;
  pool.s_per_token -= own.s_per_token;
  own.rate = e.prefill_tokens_per_s;
  own.attention_q = e.attention_q;
  own.samples = static_cast<double>(e.prefill_samples);
  const bool contributes = own.samples >= min_samples_ && own.rate > 0;
  own.weight = contributes ? own.samples : 0;
  own.s_per_token = contributes ? own.samples / own.rate : 0;
  pool.weight += own.weight;
  pool.s_per_token += own.s_per_token;

  pool.decode_weight -= own.decode_weight;
  pool.decode.base_s -= own.decode.base_s;
  pool.decode.per_sequence_s -= own.decode.per_sequence_s;
  pool.decode.per_kv_token_s -= own.decode.per_kv_token_s;
  own.decode_samples = static_cast<double>(e.decode_samples);
  own.decode_weight = own.decode_samples >= min_samples_ ? own.decode_samples : 0;
  own.decode = sched::StepTimeModel{e.decode.base_s * own.decode_weight,
                                    e.decode.per_sequence_s * own.decode_weight,
                                    e.decode.per_kv_token_s * own.decode_weight};
  pool.decode_weight += own.decode_weight;
  pool.decode.base_s += own.decode.base_s;
  pool.decode.per_sequence_s += own.decode.per_sequence_s;
  pool.decode.per_kv_token_s += own.decode.per_kv_token_s;
}

bool PeerPools::Apply(WorkerId worker, sched::WorkerSnapshot* s) const {
  if (worker >= own_.size() || !own_[worker].joined) return false;
  const Own& own = own_[worker];
  const Pool& pool = pools_[own.pool];
  s->prefill_attention_per_token = own.attention_q;  // the model's shape, not pooled
  if (own.rate > 0) {
    if (options_.enabled && pool.weight > 0 && pool.s_per_token > 0) {
      const double peer_rate = pool.weight / pool.s_per_token;
      s->prefill_tokens_per_s =
          own.samples < min_samples_
              ? peer_rate
              : ShrinkTowardPeers(own.rate, own.samples, peer_rate, options_.prefill_prior_samples);
    } else {
      s->prefill_tokens_per_s = own.rate;
    }
  }
  const bool lend = options_.enabled && own.decode_samples < min_samples_ && pool.decode_weight > 0;
  if (lend) {
    // The pool is kept by adding and subtracting: rounding can leave a coefficient a hair
    // below zero where every member's is zero.
    s->decode_step =
        sched::StepTimeModel{std::max(0.0, pool.decode.base_s / pool.decode_weight),
                             std::max(0.0, pool.decode.per_sequence_s / pool.decode_weight),
                             std::max(0.0, pool.decode.per_kv_token_s / pool.decode_weight)};
  }
  return lend;
}

}  // namespace kvroute::fleet
