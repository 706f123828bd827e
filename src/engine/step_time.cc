#include "engine/step_time.h"

#include <algorithm>
#include <cmath>

namespace kvroute::engine {

StepTimeModel::StepTimeModel(const Profile& profile) : profile_(profile) {
  const ModelSpec& m = profile_.model;
  const HardwareSpec& hw = profile_.hardware;
  const double tp = std::max<std::uint32_t>(hw.num_gpus, 1);
  const double layers = m.num_layers;
  if (m.mla) {
    // One latent (kv_lora_rank) plus the decoupled RoPE key per token and layer. vLLM
    // replicates it on every TP rank: the latent is shared by all heads, so it cannot be split.
    kv_bytes_per_token_per_gpu_ =
        layers * (m.kv_lora_rank + m.qk_rope_head_dim) * m.kv_bytes_per_element;
    kv_bytes_per_token_transfer_ = kv_bytes_per_token_per_gpu_;
  } else {
    const double full = 2.0 * layers * m.num_kv_heads * m.head_dim * m.kv_bytes_per_element;
    // With fewer KV heads than ranks, vLLM replicates heads so every rank holds one.
    const double heads_per_gpu = std::max(1.0, m.num_kv_heads / tp);
    kv_bytes_per_token_per_gpu_ =
        2.0 * layers * heads_per_gpu * m.head_dim * m.kv_bytes_per_element;
    kv_bytes_per_token_transfer_ = full;
  }
  // Per (query, key) pair and layer: q·k over the q/k width and p·v over the v width, 2 FLOPs
  // per multiply-add, every query head.
  const double qk_dim = m.mla ? (m.qk_nope_head_dim + m.qk_rope_head_dim) : m.head_dim;
  const double v_dim = m.head_dim;
  attn_flops_per_pair_ = 2.0 * m.num_attention_heads * (qk_dim + v_dim) * layers;
  weight_bytes_ = m.total_params * m.weight_bytes_per_param;
  compute_rate_ = hw.peak_flops * tp * profile_.runtime.compute_efficiency;
  // Memory time is computed per GPU (each rank streams its own shard), see BytesOf.
  memory_rate_ = hw.hbm_bandwidth_bytes_per_s * profile_.runtime.memory_efficiency;
}

double StepTimeModel::FlopsOf(std::span<const SeqWork> seqs) const {
  double tokens = 0;
  double pairs = 0;
  for (const SeqWork& s : seqs) {
    const double n = s.new_tokens;
    const double c = static_cast<double>(s.context_tokens);
    tokens += n;
    pairs += n * c + n * (n + 1) / 2;  // causal: new token i sees c + i + 1 keys
  }
  return 2.0 * profile_.model.active_params * tokens + attn_flops_per_pair_ * pairs;
}

double StepTimeModel::WeightBytesRead(double tokens) const {
  const ModelSpec& m = profile_.model;
  if (m.num_experts == 0) return weight_bytes_;
  const double touched =
      1.0 - std::pow(1.0 - static_cast<double>(m.experts_per_token) / m.num_experts, tokens);
  return ((m.total_params - m.expert_params) + m.expert_params * touched) *
         m.weight_bytes_per_param;
}

double StepTimeModel::BytesOf(std::span<const SeqWork> seqs) const {
  // Per GPU: its weight shard once per step, plus the KV it reads (context) and writes (new).
  const double shards = std::max<std::uint32_t>(profile_.hardware.WeightShards(), 1);
  double kv_tokens = 0;
  double tokens = 0;
  for (const SeqWork& s : seqs) {
    kv_tokens += static_cast<double>(s.context_tokens) + s.new_tokens;
    tokens += s.new_tokens;
  }
  return WeightBytesRead(tokens) / shards + kv_tokens * kv_bytes_per_token_per_gpu_;
}

Nanos StepTimeModel::StepTime(std::span<const SeqWork> seqs) const {
  bool any = false;
  for (const SeqWork& s : seqs) any = any || s.new_tokens > 0;
  if (!any) return Nanos(0);
  const double compute_s = FlopsOf(seqs) / compute_rate_;
  const double memory_s = BytesOf(seqs) / memory_rate_;
  return FromSeconds(profile_.runtime.step_overhead_s + std::max(compute_s, memory_s));
}

Nanos StepTimeModel::PrefillTime(std::uint32_t tokens, std::uint64_t context) const {
  const SeqWork seq{.new_tokens = tokens, .context_tokens = context};
  return StepTime(std::span<const SeqWork>(&seq, 1));
}

Nanos StepTimeModel::DecodeStepTime(std::uint32_t batch, std::uint64_t total_context) const {
  if (batch == 0) return Nanos(0);
  // Spread the context evenly: the roofline terms are linear in context, so the split does
  // not change the result.
  const double per_seq = static_cast<double>(total_context) / batch;
  const SeqWork seq{.new_tokens = 1, .context_tokens = 0};
  const double shards = std::max<std::uint32_t>(profile_.hardware.WeightShards(), 1);
  const double flops =
      batch * (FlopsOf(std::span<const SeqWork>(&seq, 1)) + attn_flops_per_pair_ * per_seq);
  const double bytes = WeightBytesRead(batch) / shards +
                       (static_cast<double>(total_context) + batch) * kv_bytes_per_token_per_gpu_;
  const double s = std::max(flops / compute_rate_, bytes / memory_rate_);
  return FromSeconds(profile_.runtime.step_overhead_s + s);
}

std::int64_t StepTimeModel::NumGpuBlocks(std::uint32_t block_size) const {
  const HardwareSpec& hw = profile_.hardware;
  const double shards = std::max<std::uint32_t>(hw.WeightShards(), 1);
  const double free_bytes = hw.memory_bytes_per_gpu * profile_.runtime.gpu_memory_utilization -
                            weight_bytes_ / shards -
                            profile_.runtime.activation_reserve_bytes_per_gpu;
  const double block_bytes = kv_bytes_per_token_per_gpu_ * block_size;
  if (free_bytes <= 0 || block_bytes <= 0) return 0;
  return static_cast<std::int64_t>(std::floor(free_bytes / block_bytes));
}

}  // namespace kvroute::engine
