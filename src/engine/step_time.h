// StepTimeModel: the roofline model of one engine step, and the KV memory arithmetic of a
// profile. Pure functions of a Profile; the engine, benchmarks and the router's cost model all
// call the same predictions.
//
//   step time = overhead + max(compute, memory)
//   compute   = (2 × active_params × tokens + attention FLOPs) / (peak × TP × compute_eff)
//   memory    = (weight bytes + KV bytes read and written) / (HBM BW × TP × memory_eff)
//
// Attention FLOPs count the query·key and probability·value products of every (query, key)
// pair the batch touches: a prefill chunk of n new tokens on top of c cached ones has
// n·c + n(n+1)/2 pairs; a decode token has context + 1. MoE: FLOPs use active parameters;
// every step reads all expert weights (at the batch sizes a router cares about — dozens of
// tokens × top-8 of 256 experts — nearly every expert is touched; at batch 1 this
// overestimates the step, which is the conservative side for a router).
//
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <span>

#include "common/types.h"
#include "engine/profile.h"

namespace kvroute::engine {

// One sequence's share of a step: `new_tokens` computed on top of `context_tokens` already
// in its KV cache. A decode step is new_tokens = 1.
struct SeqWork {
  std::uint32_t new_tokens = 0;
  std::uint64_t context_tokens = 0;
};

class StepTimeModel {
 public:
  explicit StepTimeModel(const Profile& profile);

  // Duration of a step that runs `seqs` together (prefill chunks and decodes mixed).
  // Empty → 0.
  Nanos StepTime(std::span<const SeqWork> seqs) const;

  // One sequence prefilling `tokens` new tokens on top of `context` cached ones, alone.
  Nanos PrefillTime(std::uint32_t tokens, std::uint64_t context = 0) const;

  // One decode step of `batch` sequences whose contexts add up to `total_context` tokens.
  Nanos DecodeStepTime(std::uint32_t batch, std::uint64_t total_context) const;

  // KV cache bytes one token occupies on one GPU (all layers). GQA heads are split over the
  // TP ranks (at least one per rank); an MLA latent is replicated on every rank.
  double KvBytesPerTokenPerGpu() const { return kv_bytes_per_token_per_gpu_; }
  // KV bytes per token summed over the ranks that hold a copy of it: what moving one
  // token's KV costs when it leaves the GPUs (CPU tier, P/D transfer).
  double KvBytesPerTokenTransfer() const { return kv_bytes_per_token_transfer_; }

  // vLLM's capacity: (memory × gpu_memory_utilization − weights/TP − activation reserve)
  // / (KV bytes per token per GPU × block_size), floored; at least 0.
  std::int64_t NumGpuBlocks(std::uint32_t block_size) const;

 private:
  double FlopsOf(std::span<const SeqWork> seqs) const;
  double BytesOf(std::span<const SeqWork> seqs) const;
  // Weight bytes (all GPUs) a step of `tokens` tokens streams: all of them, or with the MoE
  // fields the dense part plus the expected touched experts.
  double WeightBytesRead(double tokens) const;

  Profile profile_;
  double kv_bytes_per_token_per_gpu_ = 0;
  double kv_bytes_per_token_transfer_ = 0;
  double attn_flops_per_pair_ = 0;  // whole model, all layers and heads
  double weight_bytes_ = 0;         // all GPUs together
  double compute_rate_ = 0;         // FLOP/s, all GPUs, efficiency applied
  double memory_rate_ = 0;          // bytes/s, all GPUs, efficiency applied
};

}  // namespace kvroute::engine
