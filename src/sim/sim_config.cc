#include "sim/sim_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace kvroute::sim {

engine::EngineConfig SimConfig::ToEngineConfig() const {
  engine::EngineConfig c;
  c.block_size = block_size;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_num_batched_tokens;
  c.num_gpu_blocks_override = num_gpu_blocks;
  c.num_cpu_blocks = num_cpu_blocks;
  c.disk.num_blocks = num_disk_blocks;
  c.async_tier_loads = async_tier_loads;
  if (disk_read_bandwidth > 0) c.disk.read_bytes_per_s = disk_read_bandwidth;
  if (disk_write_bandwidth > 0) c.disk.write_bytes_per_s = disk_write_bandwidth;
  if (disk_latency_s >= 0) c.disk.latency_s = disk_latency_s;
  if (kv_store_bandwidth > 0) c.shared.read_bytes_per_s = kv_store_bandwidth;
  if (kv_store_latency_s >= 0) c.shared.latency_s = kv_store_latency_s;
  if (kv_store_lease_renew_s >= 0) c.shared.lease_renew_every = FromSeconds(kv_store_lease_renew_s);
  c.max_model_len = max_model_len;
  c.seed = seed;
  c.pinned_kv_timeout = FromSeconds(nixl_abort_request_timeout_s);
  c.kv_link.name = kv_link;
  return c;
}

std::optional<std::pair<std::string, std::uint16_t>> ParseHostPort(std::string_view s) {
  const std::size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 >= s.size()) return std::nullopt;
  std::string host(s.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned port = 0;
  for (char ch : s.substr(colon + 1)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    port = port * 10 + static_cast<unsigned>(ch - '0');
    if (port > 65535) return std::nullopt;
  }
  if (port == 0) return std::nullopt;
  return std::pair{host, static_cast<std::uint16_t>(port)};
}

std::expected<void, std::string> Validate(const SimConfig& c) {
  auto fail = [](std::string m) { return std::unexpected(std::move(m)); };
  if (c.port < 0 || c.port > 65535) return fail("--port must be in 0..65535");
  if (c.http_threads < 1 || c.http_threads > 256) return fail("--http-threads must be in 1..256");
  if (c.shutdown_timeout_s < 0) return fail("--shutdown-timeout must be >= 0");
  if (!(c.speedup > 0)) return fail("--speedup must be > 0");
  const std::uint32_t sizes[] = {1, 8, 16, 32, 64, 128, 256};
  if (std::find(std::begin(sizes), std::end(sizes), c.block_size) == std::end(sizes)) {
    return fail("--block-size must be one of 1, 8, 16, 32, 64, 128, 256 (vLLM's choices)");
  }
  if (c.max_num_seqs < 1) return fail("--max-num-seqs must be >= 1");
  if (c.image_placeholder.empty()) return fail("--image-placeholder must not be empty");
  for (const auto& m : c.lora_modules) {
    if (m.empty() || m.front() == '=') return fail("--lora-modules: an adapter needs a name");
  }
  if (c.max_num_batched_tokens < 1) return fail("--max-num-batched-tokens must be >= 1");
  if (c.num_gpu_blocks < 0) return fail("--num-gpu-blocks must be >= 0");
  if (c.num_cpu_blocks < 0) return fail("--num-cpu-blocks must be >= 0");
  if (c.num_disk_blocks < 0) return fail("--num-disk-blocks must be >= 0");
  if (!c.kv_store.empty() && !ParseHostPort(c.kv_store)) {
    return fail("--kv-store must be HOST:PORT (got '" + c.kv_store + "')");
  }
  if (c.kv_events_encoding != "map" && c.kv_events_encoding != "array") {
    return fail("--kv-events-encoding must be 'map' or 'array'");
  }
  if (c.kv_events && c.kv_events_endpoint.empty()) {
    return fail("--kv-events-endpoint must not be empty (use --no-kv-events)");
  }
  if (c.kv_side_channel_port < 0 || c.kv_side_channel_port > 65535) {
    return fail("--kv-side-channel-port must be in 0..65535");
  }
  if (c.kv_transfer && c.kv_side_channel_host.empty()) {
    return fail("--kv-side-channel-host must not be empty");
  }
  if (!(c.nixl_abort_request_timeout_s >= 0)) {
    return fail("--nixl-abort-request-timeout must be >= 0");
  }
  if (c.kv_events_buffer_steps < 1) return fail("--kv-events-buffer-steps must be >= 1");
  if (c.kv_events_drop_every == 1) {
    return fail("--kv-events-drop-every must be 0 (off) or >= 2 (1 would drop every batch)");
  }
  return {};
}

std::expected<KeyValues, std::string> ReadYamlKeyValues(std::string_view yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return std::unexpected(std::string("invalid YAML: ") + e.what());
  }
  KeyValues out;
  if (root.IsNull()) return out;  // an empty file sets nothing
  if (!root.IsMap())
    return std::unexpected("the config file must be a YAML mapping of flag: value");
  for (const auto& entry : root) {
    std::string key = entry.first.as<std::string>();
    std::replace(key.begin(), key.end(), '_', '-');
    std::vector<std::string> values;
    const YAML::Node& v = entry.second;
    if (v.IsScalar()) {
      values.push_back(v.as<std::string>());
    } else if (v.IsSequence()) {
      for (const auto& item : v) {
        if (!item.IsScalar()) return std::unexpected("'" + key + "': list items must be scalars");
        values.push_back(item.as<std::string>());
      }
    } else if (!v.IsNull()) {
      return std::unexpected("'" + key + "': nested mappings are not settings");
    }
    out.emplace_back(std::move(key), std::move(values));
  }
  return out;
}

}  // namespace kvroute::sim
