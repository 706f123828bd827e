// Topologies of `kvroute bench compare --topology`: the same workload on different fleets, each
// normalised per GPU. A topology is a fleet file in the format `kvroute simulate --fleet`
// reads (simulate/fleet.h: count, profile, role, tp, gpus, link, engine), parsed by that same
// parser so a fleet means one thing live and simulated; or a preset name ("infera": Infera's
// aggregated TP8 engine and its 1 × TP4 prefill + 4 × TP2 decode fleet, the two files of
// scripts/pd/).
//
// A topology becomes one SimLaunch per worker: the sim's own flags (profile, engine settings,
// NixlConnector role, KV link) and what `kvroute serve` is told about it (role, tp, gpus,
// link). `changes:` (failures, restarts) are a simulate feature and are refused here.
//
// Errors are returned as text naming the file or the entry. Thread safety: pure functions
// (LoadTopologies reads files).
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cluster.h"

namespace kvroute::bench {

struct Topology {
  std::string name;  // the file's stem ("infera-pd"), or the preset's fleet name
  std::vector<SimLaunch> sims;
  int gpus = 0;     // summed over workers: the per-GPU goodput divides by it
  bool pd = false;  // some worker has role prefill or decode
};

// Parses one fleet YAML (`text`) named `name`.
std::expected<Topology, std::string> ParseTopology(std::string_view name, std::string_view text);

// Each of `specs` is a preset name or a fleet file path; a preset expands to its fleets.
std::expected<std::vector<Topology>, std::string> LoadTopologies(
    const std::vector<std::string>& specs);

// The preset names LoadTopologies knows, and the fleet files (name, YAML) of one.
std::vector<std::string> TopologyPresetNames();
std::vector<std::pair<std::string, std::string>> TopologyPreset(std::string_view name);

// A topology's sims may be routed by `router`: nginx cannot run the two-leg P/D exchange.
bool RouterFitsTopology(const std::string& router, const Topology& topology);

}  // namespace kvroute::bench
