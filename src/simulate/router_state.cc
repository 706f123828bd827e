#include "simulate/router_state.h"

#include <algorithm>

#include "engine/step_time.h"

namespace kvroute::simulate {

RateSeed SeedRates(const engine::Profile& profile, std::uint32_t block_size) {
  const engine::StepTimeModel model(profile);
  RateSeed seed;
  // Throughput of a typical uncached prefill (4,096 tokens on an empty context).
  constexpr std::uint32_t kPrefillTokens = 4096;
  seed.prefill_tokens_per_s = kPrefillTokens / ToSeconds(model.PrefillTime(kPrefillTokens));
  // Linear decode model through three roofline points: batch 1 and 2 on empty contexts, and
  // batch 1 on a long context.
  constexpr std::uint64_t kContext = 100000;
  const double t1 = ToSeconds(model.DecodeStepTime(1, 0));
  const double t2 = ToSeconds(model.DecodeStepTime(2, 0));
  const double tk = ToSeconds(model.DecodeStepTime(1, kContext));
  seed.decode.per_sequence_s = std::max(0.0, t2 - t1);
  seed.decode.base_s = std::max(0.0, t1 - seed.decode.per_sequence_s);
  seed.decode.per_kv_token_s = std::max(0.0, (tk - t1) / static_cast<double>(kContext));
  seed.kv_bytes_per_block = model.KvBytesPerTokenTransfer() * block_size;
  return seed;
}

void RouterState::ResetWorker(WorkerId worker, const RateSeed& seed) {
  if (workers_.size() <= worker) workers_.resize(worker + 1);
  Worker& w = workers_[worker];
  w = Worker{};
  w.prefill_tokens_per_s = seed.prefill_tokens_per_s;
  w.decode = seed.decode;
  w.kv_bytes_per_block = seed.kv_bytes_per_block;
}

void RouterState::ForgetWorker(WorkerId worker) {
  Worker& w = workers_[worker];
  w.inflight = 0;
  w.pending_prefill = 0;
  w.active_blocks = 0;
}

Booking RouterState::OnRouted(WorkerId worker, std::uint64_t uncached_tokens,
                              std::uint64_t kv_blocks) {
  Worker& w = workers_[worker];
  Booking b{worker, uncached_tokens, kv_blocks, w.pending_prefill == 0, false};
  ++w.inflight;
  w.pending_prefill += uncached_tokens;
  w.active_blocks += kv_blocks;
  return b;
}

void RouterState::OnFirstToken(Booking* b, Nanos ttft) {
  if (b->first_token_seen) return;
  b->first_token_seen = true;
  Worker& w = workers_[b->worker];
  w.pending_prefill -= std::min(w.pending_prefill, b->uncached_tokens);
  // Only a queue-free TTFT measures the worker's own prefill speed; tiny prefills are
  // dominated by the step overhead and would drag the estimate down.
  constexpr std::uint64_t kMinSampleTokens = 256;
  const double s = ToSeconds(ttft);
  if (b->queue_free && b->uncached_tokens >= kMinSampleTokens && s > 0) {
    const double rate = static_cast<double>(b->uncached_tokens) / s;
    w.prefill_tokens_per_s += kPrefillAlpha * (rate - w.prefill_tokens_per_s);
    ++w.samples;
  }
}

void RouterState::OnDone(Booking* b) {
  Worker& w = workers_[b->worker];
  if (!b->first_token_seen) {
    w.pending_prefill -= std::min(w.pending_prefill, b->uncached_tokens);
    b->first_token_seen = true;
  }
  w.inflight -= std::min<std::uint32_t>(w.inflight, 1);
  w.active_blocks -= std::min(w.active_blocks, b->kv_blocks);
}

void RouterState::Fill(WorkerId worker, sched::WorkerSnapshot* s) const {
  const Worker& w = workers_[worker];
  s->inflight_requests = w.inflight;
  s->pending_prefill_tokens = w.pending_prefill;
  s->active_kv_blocks = w.active_blocks;
  s->prefill_tokens_per_s = w.prefill_tokens_per_s;
  s->decode_step = w.decode;
  s->kv_bytes_per_block = w.kv_bytes_per_block;
}

}  // namespace kvroute::simulate
