// SimConfig: every setting of `kvroute sim`, with vLLM's defaults where vLLM has the same
// knob. Filled from a YAML file (--config, same keys as the flags) and then from flags; the
// flags win. Validate() runs once at start-up; a bad value stops the process with a message.
//
// Thread safety: plain value.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/profile.h"
#include "sim/kv_transfer_config.h"

namespace kvroute::sim {

struct SimConfig {
  // HTTP surface.
  std::string host = "0.0.0.0";  // vLLM listens on every interface by default
  int port = 8000;               // 0: the OS picks one; the ready line prints it
  int http_threads = 2;
  std::string served_model_name;  // empty: the profile's served_model_name
  double shutdown_timeout_s = 0;  // vLLM --shutdown-timeout: 0 aborts in-flight at once
  // vLLM --lora-modules name=path ...: adapters served besides the base model (listed in
  // /v1/models with the base as parent; a request naming one runs with that LoRA, whose name
  // enters its blocks' extra keys). Only the names matter; paths are kept for /v1/models.
  std::vector<std::string> lora_modules;

  // Engine model.
  std::string profile{engine::kDefaultProfileName};  // embedded name or path to a .yaml
  std::uint32_t block_size = 16;
  std::uint32_t max_num_seqs = 256;
  std::uint32_t max_num_batched_tokens = 8192;
  std::int64_t num_gpu_blocks = 0;  // 0: from the profile's memory arithmetic
  std::int64_t num_cpu_blocks = 0;  // 0: no CPU tier
  // Lower KV tiers (engine README "KV tiers"): a local disk per sim, and the cluster's shared
  // store (`kvroute store` at HOST:PORT; empty = none). 0 / negative bandwidths: the engine
  // model's defaults (EngineConfig::disk, ::shared).
  std::int64_t num_disk_blocks = 0;
  bool async_tier_loads = false;    // EngineConfig::async_tier_loads
  double disk_read_bandwidth = 0;   // bytes/s
  double disk_write_bandwidth = 0;  // bytes/s
  double disk_latency_s = -1;       // < 0: default
  std::string kv_store;             // HOST:PORT
  double kv_store_bandwidth = 0;    // bytes/s
  double kv_store_latency_s = -1;   // < 0: default
  double kv_store_lease_renew_s = -1;  // < 0: default (20 s); 0: never renew
  std::uint32_t max_model_len = 0;  // 0: from the profile
  std::uint64_t seed = 0;           // output text when the request has no seed
  double speedup = 1.0;             // simulated time runs this many times faster than real time

  // KV events (vLLM kv_events_config).
  bool kv_events = true;
  std::string kv_events_endpoint = "tcp://*:5557";
  std::string kv_events_topic;
  std::string kv_events_replay_endpoint;   // empty: no replay socket
  std::string kv_events_encoding = "map";  // map (vLLM main) | array (vLLM ≤ 2026-05)
  std::uint64_t kv_events_buffer_steps = 10000;
  // Test only: when N > 1, every Nth batch (seq N-1, 2N-1, ...) is numbered and kept for
  // replay but not sent on the PUB socket, so subscribers see gaps and must replay. 0: off.
  std::uint64_t kv_events_drop_every = 0;

  // Tokenizer: empty = SimpleTokenizer (no model files); otherwise a Hugging Face model
  // directory (tokenizer.json + tokenizer_config.json) or the name of a shipped model
  // (tokenize::ShippedModelNames(): qwen3, llama3_1, deepseek_v3). See sim_tokenizer.h.
  std::string tokenizer;

  // Images (OpenAI image_url parts of chat requests): each is `image_placeholder` in the chat
  // content, expanded to `image_tokens` prompt tokens of `image_token_id` (the engine prefills
  // them like any prompt token; its blocks carry the image's identifier in their extra keys).
  // 0 / -1: the --tokenizer directory's config.json, else 64 tokens and the placeholder's last
  // token — what `kvroute serve` assumes too (images.* in its configuration).
  std::string image_placeholder = "<image>";
  std::uint32_t image_tokens = 0;
  std::int64_t image_token_id = -1;

  // P/D disaggregation (vLLM --kv-transfer-config with NixlConnector): unset = no KV
  // connector, kv_transfer_params are ignored.
  std::optional<KvTransferConfig> kv_transfer;
  // The side channel decoders contact (vLLM's VLLM_NIXL_SIDE_CHANNEL_HOST/PORT): bound,
  // and advertised as remote_host/remote_port in prefill answers. Port 0: the OS picks.
  std::string kv_side_channel_host = "localhost";
  int kv_side_channel_port = 5600;
  // Pinned prefill KV is freed after this many simulated seconds if no decoder read it
  // (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT).
  double nixl_abort_request_timeout_s = 480;
  // The profile link remote KV arrives over (profiles/*.yaml `links`); empty = the first.
  std::string kv_link;

  std::string log_level = "info";

  // The engine's configuration (before engine::ResolveConfig fills profile defaults).
  engine::EngineConfig ToEngineConfig() const;
};

// Checks ranges and enumerations. The message names the flag.
std::expected<void, std::string> Validate(const SimConfig& config);

// "host:port" or "[v6]:port" → (host, port); nullopt unless the port is in 1..65535.
std::optional<std::pair<std::string, std::uint16_t>> ParseHostPort(std::string_view s);

// A YAML mapping of scalars (or lists of scalars) read as key → values, keys normalised to
// flag spelling (underscores become dashes), in file order. What `--config sim.yaml` feeds
// to the flag parser, so the file accepts exactly the flags' keys and value syntax.
using KeyValues = std::vector<std::pair<std::string, std::vector<std::string>>>;
std::expected<KeyValues, std::string> ReadYamlKeyValues(std::string_view yaml_text);

}  // namespace kvroute::sim
