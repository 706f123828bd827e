#include "sched/latency_model.h"

#include <algorithm>
#include <cmath>

namespace kvroute::sched {
namespace {

constexpr int kGpu = static_cast<int>(Tier::kGpu);

// Every time this file reports goes through Bound: finite, within [0, kMaxPredictedSeconds].
// NaN (impossible once the inputs are checked) reads as hopeless, never as free.
double Bound(double s) {
  if (std::isnan(s)) return kMaxPredictedSeconds;
  return std::clamp(s, 0.0, kMaxPredictedSeconds);
}

std::string Named(const WorkerSnapshot& worker, const char* what) {
  return "worker '" + worker.name + "' " + what;
}

// The prefill rate, checked: absent, non-finite or not positive is an error.
std::expected<double, std::string> PrefillRate(const WorkerSnapshot& worker) {
  if (!worker.prefill_tokens_per_s) return std::unexpected(Named(worker, "has no prefill_tokens_per_s"));
  const double rate = *worker.prefill_tokens_per_s;
  if (!std::isfinite(rate) || !(rate > 0)) {
    return std::unexpected(Named(worker, "has an unusable prefill_tokens_per_s (not a positive number)"));
  }
  return rate;
}

// Seconds to prefill `uncached` tokens on top of `cached` ones at this worker's learned
// curve (types.h): a line at q = 0, attention's share on top otherwise.
std::expected<double, std::string> PrefillSecondsChecked(const WorkerSnapshot& worker,
                                                         double uncached, double cached) {
  auto rate = PrefillRate(worker);
  if (!rate) return std::unexpected(rate.error());
  const double q = worker.prefill_attention_per_token;
  if (!std::isfinite(q) || q < 0) {
    return std::unexpected(
        Named(worker, "has an unusable prefill_attention_per_token (not a number >= 0)"));
  }
  const double work = uncached + q * (uncached * uncached + 2 * uncached * cached);
  return Bound(work / (*rate * (1 + q * kPrefillRateReferenceTokens)));
}

// The decode model, checked: absent or with a non-finite coefficient is an error.
std::expected<const StepTimeModel*, std::string> DecodeModel(const WorkerSnapshot& worker) {
  if (!worker.decode_step) return std::unexpected(Named(worker, "has no decode_step model"));
  const StepTimeModel& m = *worker.decode_step;
  if (!std::isfinite(m.base_s) || !std::isfinite(m.per_sequence_s) ||
      !std::isfinite(m.per_kv_token_s)) {
    return std::unexpected(Named(worker, "has a decode_step model with a non-finite coefficient"));
  }
  return &m;
}

// One step's time: a fitted model may have a negative coefficient, a step never takes less
// than nothing.
double StepSeconds(const StepTimeModel& m, double batch, double kv_tokens) {
  return Bound(m.Seconds(batch, kv_tokens));
}

std::expected<double, std::string> WaitCorrection(const WorkerSnapshot& worker) {
  const double c = worker.wait_correction;
  if (!std::isfinite(c) || !(c > 0)) {
    return std::unexpected(Named(worker, "has an unusable wait_correction (not a positive number)"));
  }
  return c;
}

bool Loadable(const WorkerSnapshot& worker, int tier) {
  const auto& bw = worker.tier_load_bytes_per_s[tier];
  return bw.has_value() && *bw > 0 && worker.kv_bytes_per_block.has_value() &&
         *worker.kv_bytes_per_block >= 0;
}

// When this request's lower-tier load would end behind the loads already routed to the worker
// on the same paths, seconds from now: the slowest path's backlog plus its own bytes. Pending
// bytes that are not a finite non-negative number count as none (the router's own booking;
// never a caller's input).
double TierPathSeconds(const LoadPlan& plan, const WorkerSnapshot& worker) {
  double path_s = 0;
  for (int t = kGpu + 1; t < kNumTiers; ++t) {
    if (plan.load_blocks[t] == 0) continue;  // only loadable tiers have load blocks
    const double pending = worker.pending_tier_load_bytes[t];
    const double ahead = std::isfinite(pending) && pending > 0 ? pending : 0;
    path_s = std::max(path_s, Bound((ahead + plan.load_blocks[t] * *worker.kv_bytes_per_block) /
                                    *worker.tier_load_bytes_per_s[t]));
  }
  return path_s;
}

}  // namespace

std::uint32_t LayeredHits::total() const {
  std::uint32_t sum = mixed_blocks;
  for (auto b : blocks) sum += b;
  return sum;
}

LayeredHits LayerHits(const CacheView& view, std::uint32_t num_full_blocks) {
  LayeredHits hits;
  std::uint32_t covered = 0;
  for (int t = 0; t < kNumTiers; ++t) {
    const std::uint32_t depth = std::min(view.depth_blocks[t], num_full_blocks);
    if (depth > covered) {
      hits.blocks[t] = depth - covered;
      covered = depth;
    }
  }
  // The "any" depth can only be deeper than every single tier (the caller's value is
  // clamped up, so a smaller one never erases a tier hit).
  const std::uint32_t any = std::min(view.any_depth_blocks, num_full_blocks);
  if (any > covered) hits.mixed_blocks = any - covered;
  return hits;
}

LoadPlan PlanLoad(const RequestProfile& request, const CacheView& view,
                  const WorkerSnapshot& worker) {
  const LayeredHits hits = LayerHits(view, request.num_full_blocks);
  LoadPlan plan;
  plan.load_blocks[kGpu] = hits.blocks[kGpu];
  int slowest = -1;  // slowest loadable lower tier, for the mixed blocks
  for (int t = kGpu + 1; t < kNumTiers; ++t) {
    if (!Loadable(worker, t)) continue;
    plan.load_blocks[t] = hits.blocks[t];
    if (slowest < 0 || *worker.tier_load_bytes_per_s[t] < *worker.tier_load_bytes_per_s[slowest]) {
      slowest = t;
    }
  }
  if (slowest >= 0) plan.load_blocks[slowest] += hits.mixed_blocks;
  for (int t = 0; t < kNumTiers; ++t) {
    plan.hit_blocks += plan.load_blocks[t];
    // Each lower tier reaches GPU memory over its own path (host DMA, NVMe, the store's NIC),
    // in parallel, so the request waits for the slowest tier, not their sum (the engine
    // model's rule too, engine/README.md "KV tiers").
    if (t != kGpu && plan.load_blocks[t] > 0) {
      plan.load_s = std::max(plan.load_s, Bound(plan.load_blocks[t] * *worker.kv_bytes_per_block /
                                                *worker.tier_load_bytes_per_s[t]));
    }
  }
  const std::uint64_t hit_tokens = static_cast<std::uint64_t>(plan.hit_blocks) * request.block_size;
  plan.uncached_tokens =
      request.prompt_tokens > hit_tokens ? request.prompt_tokens - hit_tokens : 0;
  return plan;
}

double HeldKvBlocks(const WorkerSnapshot& worker, std::uint32_t block_size) {
  const auto booked = static_cast<double>(worker.active_kv_blocks);
  if (!worker.scraped || !worker.scraped->kv_usage || worker.kv_capacity_blocks == 0) {
    return booked;
  }
  double engine = *worker.scraped->kv_usage * static_cast<double>(worker.kv_capacity_blocks) +
                  static_cast<double>(worker.pending_prefill_tokens) / block_size;
  return std::min(booked, engine);
}

std::expected<TtftPrediction, std::string> PredictTtft(const RequestProfile& request,
                                                       const CacheView& view,
                                                       const WorkerSnapshot& worker,
                                                       const TtftTerms& terms) {
  auto rate_or = PrefillRate(worker);
  if (!rate_or) return std::unexpected(rate_or.error());
  auto correction = WaitCorrection(worker);
  if (!correction) return std::unexpected(correction.error());
  const double rate = *rate_or;
  const LoadPlan plan = PlanLoad(request, view, worker);
  TtftPrediction p;
  p.wait_correction = *correction;
  p.queue_s = Bound(*correction * (static_cast<double>(worker.pending_prefill_tokens) / rate));
  const auto uncached = static_cast<double>(plan.uncached_tokens);
  auto prefill = PrefillSecondsChecked(worker, uncached, request.prompt_tokens - uncached);
  if (!prefill) return std::unexpected(prefill.error());
  p.prefill_s = *prefill;
  p.load_s = Bound(plan.load_s);
  if (terms.tier_queue > 0 && plan.load_s > 0) {
    // The prefill queue ahead drains while the loads ahead move: only the path's excess waits.
    const double queue_raw = static_cast<double>(worker.pending_prefill_tokens) / rate;
    const double behind = TierPathSeconds(plan, worker) - plan.load_s - queue_raw;
    if (behind > 0) p.tier_queue_s = Bound(terms.tier_queue * behind);
  }
  if (terms.decode_load <= 0 && terms.kv_wait <= 0) return p;

  const double batch = worker.inflight_requests;
  const double kv_tokens = static_cast<double>(worker.active_kv_blocks) * request.block_size;
  if (terms.decode_load > 0 && worker.inflight_requests > 0) {
    auto m = DecodeModel(worker);
    if (!m) return std::unexpected(m.error());
    const double marginal = StepSeconds(**m, batch, kv_tokens) - StepSeconds(**m, 0, 0);
    const double tokens = static_cast<double>(worker.pending_prefill_tokens + plan.uncached_tokens);
    const double steps = std::ceil(tokens / std::max<std::uint32_t>(terms.chunk_tokens, 1));
    p.decode_s = Bound(*correction * terms.decode_load * steps * std::max(0.0, marginal));
  }
  if (terms.kv_wait > 0 && worker.kv_capacity_blocks > 0) {
    const double held = HeldKvBlocks(worker, request.block_size);
    const std::uint64_t total_blocks =
        (request.prompt_tokens + request.predicted_output_tokens + request.block_size - 1) /
        request.block_size;
    const std::uint64_t gpu_hit = plan.load_blocks[kGpu];
    const double need = static_cast<double>(total_blocks > gpu_hit ? total_blocks - gpu_hit : 0);
    const double capacity = static_cast<double>(worker.kv_capacity_blocks);
    const double deficit = held + need - capacity;
    if (deficit > 0 && held > 0) {
      auto m = DecodeModel(worker);
      if (!m) return std::unexpected(m.error());
      const double horizon = static_cast<double>(request.predicted_output_tokens) *
                             StepSeconds(**m, batch, kv_tokens);
      p.kv_wait_s = Bound(*correction * terms.kv_wait * (deficit / capacity) * horizon);
    }
  }
  return p;
}

std::expected<double, std::string> PredictItl(const RequestProfile& request, const CacheView& view,
                                              const WorkerSnapshot& worker) {
  auto m = DecodeModel(worker);
  if (!m) return std::unexpected(m.error());
  const std::uint64_t gpu_tokens =
      static_cast<std::uint64_t>(std::min(view.depth(Tier::kGpu), request.num_full_blocks)) *
      request.block_size;
  const std::uint64_t added =
      (request.prompt_tokens > gpu_tokens ? request.prompt_tokens - gpu_tokens : 0) +
      request.predicted_output_tokens;
  const double kv_tokens = static_cast<double>(worker.active_kv_blocks) * request.block_size +
                           static_cast<double>(added);
  return StepSeconds(**m, worker.inflight_requests + 1.0, kv_tokens);
}

std::expected<DecodeSlowdown, std::string> PredictDecodeSlowdown(const RequestProfile& request,
                                                                 const CacheView& view,
                                                                 const WorkerSnapshot& worker,
                                                                 const SlowdownTerms& terms) {
  auto m_or = DecodeModel(worker);
  if (!m_or) return std::unexpected(m_or.error());
  const StepTimeModel& m = **m_or;
  const double horizon = static_cast<double>(request.predicted_output_tokens);
  const double batch = worker.inflight_requests;
  const double kv_tokens = static_cast<double>(worker.active_kv_blocks) * request.block_size;
  const double context = static_cast<double>(request.prompt_tokens) + horizon / 2;
  const double with_us = StepSeconds(m, batch + 1, kv_tokens + context);
  DecodeSlowdown d;
  // A placement never speeds anyone up.
  d.own_s = Bound(horizon * std::max(0.0, with_us - StepSeconds(m, 1, context)));
  if (worker.inflight_requests == 0) return d;
  d.others_s = Bound(terms.others_share * horizon * batch *
                     std::max(0.0, with_us - StepSeconds(m, batch, kv_tokens)));
  const bool pending_term = terms.pending > 0 && worker.pending_prefill_requests > 0;
  if (terms.stall <= 0 && !pending_term) return d;
  const LoadPlan plan = PlanLoad(request, view, worker);
  const auto uncached = static_cast<double>(plan.uncached_tokens);
  const double cached = static_cast<double>(request.prompt_tokens) - uncached;
  if (terms.stall > 0) {
    auto prefill = PrefillSecondsChecked(worker, uncached, cached);
    if (!prefill) return std::unexpected(prefill.error());
    d.stall_s = Bound(terms.stall * batch * *prefill);
  }
  if (pending_term) {
    const std::uint64_t chunk = std::max<std::uint32_t>(1, terms.chunk_tokens);
    const std::uint64_t ahead = worker.pending_prefill_tokens;
    const double shared =
        std::min(uncached, static_cast<double>(chunk - ahead % chunk));
    const double waiting = ahead < chunk ? worker.pending_prefill_requests : 1.0;
    auto prefill = PrefillSecondsChecked(worker, shared, cached);
    if (!prefill) return std::unexpected(prefill.error());
    d.pending_s = Bound(terms.pending * waiting * *prefill);
  }
  return d;
}

std::expected<double, std::string> PrefillSeconds(const WorkerSnapshot& worker,
                                                  std::uint64_t uncached_tokens,
                                                  std::uint64_t cached_tokens) {
  return PrefillSecondsChecked(worker, static_cast<double>(uncached_tokens),
                               static_cast<double>(cached_tokens));
}

std::expected<double, std::string> PredictChunkStall(const RequestProfile& request,
                                                     const CacheView& view,
                                                     const WorkerSnapshot& worker,
                                                     std::uint32_t chunk_tokens) {
  if (worker.inflight_requests == 0) return 0.0;
  const LoadPlan plan = PlanLoad(request, view, worker);
  const auto uncached = static_cast<double>(plan.uncached_tokens);
  if (uncached <= 0) return 0.0;
  auto m = DecodeModel(worker);
  if (!m) return std::unexpected(m.error());
  const double batch = worker.inflight_requests;
  const double step = StepSeconds(**m, batch, static_cast<double>(worker.active_kv_blocks) *
                                              request.block_size);
  // The decodes' tokens come out of the step's budget first; at least one prefill token.
  const double per_chunk = std::max(1.0, static_cast<double>(chunk_tokens) - batch);
  // Chunks are costed one by one (later ones attend to more context); past kMaxChunks the rest
  // is one piece that pays the step once per chunk it stands for (a bound on the loop only).
  constexpr int kMaxChunks = 4096;
  double done = static_cast<double>(request.prompt_tokens) - uncached;
  double left = uncached;
  double stall = 0;
  for (int k = 0; left > 0; ++k) {
    const double tokens = k + 1 < kMaxChunks ? std::min(per_chunk, left) : left;
    auto chunk = PrefillSecondsChecked(worker, tokens, done);
    if (!chunk) return std::unexpected(chunk.error());
    stall += std::max(0.0, *chunk - std::ceil(tokens / per_chunk) * step);
    done += tokens;
    left -= tokens;
  }
  return Bound(batch * stall);
}

double PrefixHitRatio(const RequestProfile& request, const CacheView& view) {
  if (request.num_full_blocks == 0) return 0;
  const std::uint32_t hit = LayerHits(view, request.num_full_blocks).total();
  return static_cast<double>(hit) / request.num_full_blocks;
}

}  // namespace kvroute::sched
