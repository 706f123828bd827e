// WorkerSpec: what kvroute is told about a worker before it routes there — identity, models,
// role, labels, the engine profile its rates are seeded from, its KV block size and
// capacity, the bandwidth of each tier it loads cached blocks from, and for prefill/decode
// disaggregation its tensor-parallel size, GPUs and the KV link it pulls over. `kvroute serve` builds
// it from the config file (gateway/config.h); `kvroute simulate` from its fleet (one per
// simulated engine). fleet::RouterState validates it in Add.
//
// Thread safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/tier.h"
#include "common/types.h"
#include "sched/types.h"

namespace kvroute::fleet {

// Where the worker publishes its KV events (the engine's own kv_events_config), for the
// gateway's event feed. Not read by the router state.
struct KvEventSource {
  std::string endpoint;         // empty: no events
  std::string replay_endpoint;  // empty: gaps cannot be repaired
  std::string topic;            // empty: every topic
};

struct WorkerSpec {
  std::string name;  // unique, non-empty
  // Where the drivers reach the worker (serve: http://host:port, validated by the config).
  // Not read by the router state.
  std::string base_url;
  std::vector<std::string> models;  // at least one
  sched::Role role = sched::Role::kMixed;
  std::map<std::string, std::string> labels;
  std::string profile;  // engine profile name or path; empty: engine::kDefaultProfileName
  // The engine runs this many times faster than `profile` (a `kvroute sim --speedup` fleet):
  // Add() divides the profile's seed times by it and multiplies the default CPU tier
  // bandwidth by it, so a sped-up fleet is not seeded 10x slow until samples arrive. > 0.
  double profile_speedup = 1;
  std::uint32_t block_size = 16;                    // engine KV block size, tokens; > 0
  std::optional<std::uint64_t> kv_capacity_blocks;  // override of the profile's
  // Bandwidth to load a block into GPU memory from each tier, bytes/s (Tier order).
  // Add() fills a missing CPU entry with the engine model's host-to-GPU bandwidth unless
  // RouterStateOptions::default_cpu_tier_bandwidth is off.
  std::array<std::optional<double>, kNumTiers> tier_load_bytes_per_s{};
  // The drivers' (gateway/kv_feed), like base_url; discovery fills it (etcd, static config).
  KvEventSource kv_events;

  // --- P/D (issue 19). Tensor-parallel ranks: how the worker's KV is laid out for a transfer
  // (MLA replicates the latent on every rank; a pull uses min(TP_prefill, TP_decode) NIC
  // lanes, engine/kv_transfer.h). 0: the profile's hardware.num_gpus.
  std::uint32_t tp = 0;
  // GPUs the worker occupies (per-GPU normalisation of results); 0: tp. >= tp.
  std::uint32_t gpus = 0;
  // The link remote KV arrives over when this worker decodes a split request: one of the
  // profile's `links` by name (empty: the profile's first), per lane. `link_bytes_per_s` and
  // `link_latency_s` replace the profile link's figures (a link the profile does not list
  // needs the bandwidth). No link at all: the worker takes no decode legs. Add() scales the
  // bandwidth by profile_speedup and divides the latency by it, as the seed rates.
  std::string link;
  std::optional<double> link_bytes_per_s;
  std::optional<double> link_latency_s;
};

struct WorkerInfo {
  WorkerId id = 0;
  WorkerSpec spec;
};

}  // namespace kvroute::fleet
