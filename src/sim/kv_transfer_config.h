// vLLM's JSON launch flags for P/D and KV events, read as vLLM reads them, so a launch
// line written for vLLM starts `kvroute sim` unchanged:
//   --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
//   --kv-events-config   '{"enable_kv_cache_events":true,"publisher":"zmq",
//                          "endpoint":"tcp://*:5557","topic":"kv-events"}'
// (vllm/config/kv_transfer.py, vllm/config/kv_events.py; shared/reference/vllm-protocol.md
// §1.1 and §4). Unknown keys are ignored, as vLLM's pydantic configs ignore extra ones they
// do not use here (kv_connector_extra_config, kv_buffer_device, hwm, max_queue_size, ...);
// wrong types and values are errors that name the key.
//
// vLLM's NixlConnector environment variables are read too when the flags do not say:
// VLLM_NIXL_SIDE_CHANNEL_HOST / _PORT and VLLM_NIXL_ABORT_REQUEST_TIMEOUT (NixlEnvDefaults).
//
// Thread safety: pure functions (NixlEnvDefaults reads the environment).
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace kvroute::sim {

enum class KvRole { kBoth, kProducer, kConsumer };

struct KvTransferConfig {
  std::string connector = "NixlConnector";  // the only connector simulated
  KvRole role = KvRole::kBoth;
  std::string engine_id;  // empty: a random one at start, as vLLM's uuid4
  // Can this engine serve a prefill leg (do_remote_decode) / a decode leg (do_remote_prefill)?
  bool CanProduce() const { return role != KvRole::kConsumer; }
  bool CanConsume() const { return role != KvRole::kProducer; }
};

std::expected<KvTransferConfig, std::string> ParseKvTransferConfig(std::string_view json);

// The subset of vLLM's KVEventsConfig the sim's publisher uses. Absent keys keep the value
// passed in `defaults`.
struct KvEventsSettings {
  bool enabled = true;
  std::string endpoint;
  std::string replay_endpoint;
  std::string topic;
  std::uint64_t buffer_steps = 10000;
};

// enable_kv_cache_events false, or publisher "null", turns events off (vLLM's factory).
std::expected<KvEventsSettings, std::string> ParseKvEventsConfig(std::string_view json,
                                                                 KvEventsSettings defaults);

// vLLM's NIXL environment, as defaults for the sim's flags.
struct NixlEnvDefaults {
  std::string side_channel_host = "localhost";  // VLLM_NIXL_SIDE_CHANNEL_HOST
  int side_channel_port = 5600;                 // VLLM_NIXL_SIDE_CHANNEL_PORT
  double abort_request_timeout_s = 480;         // VLLM_NIXL_ABORT_REQUEST_TIMEOUT
};
NixlEnvDefaults ReadNixlEnv();

// "kv_both" | "kv_producer" | "kv_consumer".
std::string_view KvRoleName(KvRole role);

}  // namespace kvroute::sim
