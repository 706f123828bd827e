#include "bench/topology.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/profile.h"
#include "simulate/fleet.h"

namespace kvroute::bench {
namespace {

// scripts/pd/infera-aggregated.yaml and infera-pd.yaml, byte for byte (topology_test.cc pins
// that), so `--topology infera` works from any directory and the simulate script and the
// live preset cannot drift apart.
constexpr const char* kInferaAggregated = R"(# Infera's baseline (AMD-AGI/Infera examples/kimi_agentic_bench, launch_single.sh): one
# Kimi-K2.6 MXFP4 vLLM engine on 8 MI355X, TP8, max-num-batched-tokens 8192.
fleet:
  - count: 1
    profile: kimi-k2.6-mi355x-tp8
    role: mixed
    tp: 8
    engine: {max_num_batched_tokens: 8192}
)";
constexpr const char* kInferaPd = R"(# Infera's P/D fleet (AMD-AGI/Infera examples/kimi_agentic_bench, launch_prefill.sh and
# launch_decode.sh): one TP4 prefill engine (budget 4096) and four TP2 decode replicas
# (budget 2048), 12 MI355X GPUs, KV moved over 400G RDMA (the profiles' rdma-400g link).
fleet:
  - count: 1
    profile: kimi-k2.6-mi355x-tp4
    role: prefill
    tp: 4
    link: rdma-400g
    engine: {max_num_batched_tokens: 4096}
  - count: 4
    profile: kimi-k2.6-mi355x-tp2
    role: decode
    tp: 2
    link: rdma-400g
    engine: {max_num_batched_tokens: 2048}
)";

// The `profile:` text of every worker, in fleet order (the parser keeps only the loaded
// profile; the sim and serve are given the name or path the file used). Empty: the default.
std::vector<std::string> ProfileNamesInOrder(std::string_view text) {
  std::vector<std::string> out;
  const YAML::Node root = YAML::Load(std::string(text));
  for (const auto& entry : root["fleet"]) {
    const int count = entry["count"] ? entry["count"].as<int>() : 1;
    const std::string profile = entry["profile"] ? entry["profile"].as<std::string>() : "";
    for (int i = 0; i < count; ++i) out.push_back(profile);
  }
  return out;
}

std::string KvTransferConfig(sched::Role role) {
  const char* kv_role = role == sched::Role::kPrefill  ? "kv_producer"
                        : role == sched::Role::kDecode ? "kv_consumer"
                                                       : "kv_both";
  return std::string(R"({"kv_connector":"NixlConnector","kv_role":")") + kv_role + "\"}";
}

// The sim flags of one worker's engine settings and P/D wiring.
std::expected<SimLaunch, std::string> LaunchOf(const simulate::WorkerSpec& spec,
                                               const std::string& profile, bool pd,
                                               std::size_t index) {
  const engine::EngineConfig& c = spec.config;
  if (!c.enable_chunked_prefill || !c.enable_prefix_caching) {
    return std::unexpected("worker " + std::to_string(index) +
                           ": enable_chunked_prefill / enable_prefix_caching false have no "
                           "kvroute sim flag; not supported live");
  }
  SimLaunch launch;
  launch.profile = profile;
  auto& a = launch.extra_argv;
  a = {"--block-size", std::to_string(c.block_size), "--max-num-seqs",
       std::to_string(c.max_num_seqs), "--max-num-batched-tokens",
       std::to_string(c.max_num_batched_tokens)};
  if (c.num_gpu_blocks_override > 0) {
    a.insert(a.end(), {"--num-gpu-blocks", std::to_string(c.num_gpu_blocks_override)});
  }
  if (c.num_cpu_blocks > 0) {
    a.insert(a.end(), {"--num-cpu-blocks", std::to_string(c.num_cpu_blocks)});
  }
  launch.tp = spec.profile.hardware.num_gpus;
  launch.gpus = spec.gpus > 0 ? spec.gpus : launch.tp;
  if (pd) {
    // Every worker of a P/D fleet speaks NixlConnector; its side channel on a loopback port
    // the OS picks (the prefill response's kv_transfer_params name it).
    a.insert(a.end(), {"--kv-transfer-config", KvTransferConfig(spec.role),
                       "--kv-side-channel-host", "127.0.0.1", "--kv-side-channel-port", "0"});
    launch.role = sched::RoleName(spec.role);
    if (!c.kv_link.name.empty()) {
      a.insert(a.end(), {"--kv-link", c.kv_link.name});
      launch.link = c.kv_link.name;
    }
  }
  return launch;
}

}  // namespace

std::vector<std::string> TopologyPresetNames() { return {"infera"}; }

std::vector<std::pair<std::string, std::string>> TopologyPreset(std::string_view name) {
  if (name == "infera") {
    return {{"infera-aggregated", kInferaAggregated}, {"infera-pd", kInferaPd}};
  }
  return {};
}

std::expected<Topology, std::string> ParseTopology(std::string_view name, std::string_view text) {
  auto profile = engine::LoadProfile(engine::kDefaultProfileName);
  if (!profile) return std::unexpected(profile.error());
  simulate::WorkerSpec base;
  base.profile = std::move(*profile);
  auto fleet = simulate::ParseFleetYaml(text, base);
  if (!fleet) return std::unexpected(std::string(name) + ": " + fleet.error());
  if (auto ok = simulate::ValidateFleet(*fleet); !ok) {
    return std::unexpected(std::string(name) + ": " + ok.error());
  }
  if (!fleet->changes.empty()) {
    return std::unexpected(std::string(name) +
                           ": changes (failures, restarts, added workers) are simulate-only");
  }
  std::vector<std::string> profiles;
  try {
    profiles = ProfileNamesInOrder(text);
  } catch (const YAML::Exception& e) {
    return std::unexpected(std::string(name) + ": " + e.what());
  }
  if (profiles.size() != fleet->workers.size()) {
    return std::unexpected(std::string(name) + ": could not read each worker's profile");
  }
  Topology t;
  t.name = std::string(name);
  for (const auto& w : fleet->workers) t.pd = t.pd || w.role != sched::Role::kMixed;
  for (std::size_t i = 0; i < fleet->workers.size(); ++i) {
    auto launch = LaunchOf(fleet->workers[i], profiles[i], t.pd, i);
    if (!launch) return std::unexpected(std::string(name) + ": " + launch.error());
    t.gpus += static_cast<int>(launch->gpus);
    t.sims.push_back(std::move(*launch));
  }
  return t;
}

std::expected<std::vector<Topology>, std::string> LoadTopologies(
    const std::vector<std::string>& specs) {
  std::vector<Topology> out;
  for (const std::string& spec : specs) {
    std::vector<std::pair<std::string, std::string>> files = TopologyPreset(spec);
    if (files.empty()) {
      std::ifstream in(spec);
      if (!in) return std::unexpected("--topology: cannot read " + spec + " (nor a preset)");
      std::stringstream text;
      text << in.rdbuf();
      files.emplace_back(std::filesystem::path(spec).stem().string(), text.str());
    }
    for (const auto& [name, text] : files) {
      auto t = ParseTopology(name, text);
      if (!t) return std::unexpected("--topology " + t.error());
      out.push_back(std::move(*t));
    }
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (out[i].name == out[j].name) {
        return std::unexpected("--topology: two named " + out[i].name);
      }
    }
  }
  return out;
}

bool RouterFitsTopology(const std::string& router, const Topology& topology) {
  return !(topology.pd && router.starts_with("nginx-"));
}

}  // namespace kvroute::bench
