// Profile: one model × hardware setup for the engine model (profiles/*.yaml). It holds the
// model architecture (from the model's HF config.json), the hardware (vendor datasheet), the
// runtime efficiencies of the roofline step-time model, and the published measurements
// ("anchors") the model must reproduce. Every number in a profile file carries a `source:`.
//
// The YAML files under profiles/ are embedded into the library at build time, so
// LoadProfile("qwen3-32b-tp2-h100") works from any directory; a path to a .yaml file works too.
//
// Thread safety: Profile is a plain value; the functions are pure (LoadProfile reads a file
// only when given a path).
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::engine {

// The profile `kvroute sim` uses when none is given.
inline constexpr std::string_view kDefaultProfileName = "qwen3-32b-tp2-h100";

struct ModelSpec {
  std::string hf_name;  // e.g. "Qwen/Qwen3-32B"
  std::uint32_t num_layers = 0;
  std::uint32_t hidden_size = 0;
  std::uint32_t num_attention_heads = 0;
  std::uint32_t num_kv_heads = 0;  // GQA key/value heads (MLA: unused for KV size)
  std::uint32_t head_dim = 0;      // per-head q/k/v width (MLA: v_head_dim)
  std::uint32_t vocab_size = 0;
  double total_params = 0;   // every parameter, all experts: what must sit in GPU memory
  double active_params = 0;  // parameters one token goes through (MoE: routed top-k + shared)
  double weight_bytes_per_param = 2;  // 2 = BF16, 1 = FP8
  double kv_bytes_per_element = 2;    // KV cache dtype width
  // Multi-head latent attention (DeepSeek-V2/V3): the cache holds one compressed latent of
  // kv_lora_rank + qk_rope_head_dim elements per token and layer, replicated on every TP rank.
  bool mla = false;
  std::uint32_t kv_lora_rank = 0;
  std::uint32_t qk_rope_head_dim = 0;
  std::uint32_t qk_nope_head_dim = 0;
  // MoE weight streaming (optional; 0 = every weight is read every step, the conservative
  // default). With them, a step reads the dense part plus only the routed experts its
  // tokens touch: expected fraction 1 - (1 - experts_per_token / num_experts)^tokens
  // (uniform routing). Matters for many-expert models at small batches (Kimi-K2: top-8 of
  // 384, so a batch of 4 touches ~8 % of the experts).
  std::uint32_t num_experts = 0;        // routed experts per MoE layer
  std::uint32_t experts_per_token = 0;  // top-k
  double expert_params = 0;             // parameters in routed experts, all layers
  std::string source;
};

struct HardwareSpec {
  std::string gpu;             // e.g. "H100-SXM5-80GB"
  std::uint32_t num_gpus = 1;  // tensor-parallel degree
  double memory_bytes_per_gpu = 0;
  double hbm_bandwidth_bytes_per_s = 0;  // per GPU
  double peak_flops = 0;                 // per GPU, dense, at the dtype the matmuls run in
  // GPUs the weights are split over; 0 = num_gpus (tensor parallel only). With expert
  // parallelism across data-parallel replicas (vLLM --enable-expert-parallel with DP > 1)
  // the experts — nearly all of an MoE's bytes — are sharded over TP × DP GPUs, so each
  // GPU holds and streams 1 / (TP × DP) of them. The (few %) attention weights are counted
  // as sharded too: a small underestimate of per-GPU bytes, said so where it is used.
  std::uint32_t weight_shards = 0;
  std::string source;

  std::uint32_t WeightShards() const { return weight_shards > 0 ? weight_shards : num_gpus; }
};

// A network path for KV transfers between engines (prefill → decode), per lane: one GPU's
// NIC (or one GPU's share of the intra-node fabric), one direction.
struct LinkSpec {
  std::string name;                  // e.g. "ib-400g", what --kv-link names
  double bandwidth_bytes_per_s = 0;  // achievable per lane, not the line rate
  double latency_s = 0;              // per transfer: handshake + first byte
  std::string source;
};

// Calibration of the roofline model; fitted to the anchors (and said so in `source`).
struct RuntimeSpec {
  double gpu_memory_utilization = 0.9;          // vLLM's default
  double activation_reserve_bytes_per_gpu = 0;  // activations, CUDA graphs, NCCL buffers
  double step_overhead_s = 0;                   // scheduler + launch overhead per engine step
  double compute_efficiency = 0.5;              // achieved / peak FLOPs
  double memory_efficiency = 0.8;               // achieved / peak HBM bandwidth
  std::string source;
};

enum class AnchorMetric {
  // Prefill throughput of a saturated prefill-only server: prompt_tokens / PrefillTime(
  // prompt_tokens, context_tokens), in tokens per second.
  kPrefillTokensPerS,
  // Duration of one decode step of batch_size sequences with context_tokens each (= ITL), s.
  kDecodeStepS,
  // Output tokens per second of that decode step: batch_size / step time.
  kDecodeTokensPerS,
};

// A published measurement the model must reproduce within [min, max].
struct Anchor {
  std::string name;
  AnchorMetric metric = AnchorMetric::kPrefillTokensPerS;
  std::uint32_t batch_size = 1;
  std::uint32_t prompt_tokens = 0;   // prefill anchors: new tokens
  std::uint32_t context_tokens = 0;  // tokens already in the KV cache (per sequence)
  double min = 0;
  double max = 0;
  std::string source;
};

struct Profile {
  std::string name;               // e.g. "qwen3-32b-tp2-h100"
  std::string served_model_name;  // what /v1/models reports, e.g. "Qwen/Qwen3-32B"
  std::uint32_t max_model_len = 0;
  ModelSpec model;
  HardwareSpec hardware;
  RuntimeSpec runtime;
  std::vector<Anchor> anchors;
  // KV transfer paths this setup can use (P/D disaggregation); the first is the default.
  std::vector<LinkSpec> links;

  // The link named `name` (empty: the first); nullptr when there is none.
  const LinkSpec* FindLink(std::string_view name) const;
};

const char* AnchorMetricName(AnchorMetric metric);

// `name_or_path`: the name of an embedded profile (ListProfiles()), or a path to a .yaml file.
std::expected<Profile, std::string> LoadProfile(std::string_view name_or_path);

// Parses and validates profile YAML text. `origin` names the text in error messages.
std::expected<Profile, std::string> ParseProfile(std::string_view yaml_text,
                                                 std::string_view origin = "<text>");

// Names of the embedded profiles, sorted.
std::vector<std::string> ListProfiles();

}  // namespace kvroute::engine
