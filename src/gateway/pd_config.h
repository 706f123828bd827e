// The serve configuration of prefill/decode disaggregation (issue 19): the `pd:` section
// (when to split and by which rule, mirroring `kvroute simulate`'s --pd-* flags; the prefill
// leg's timeout) and each worker's P/D fields (`tp`, `gpus`, `link`, `link_bytes_per_s`,
// `link_latency_s`), with their parsing, validation, `kvroute config check` output and the
// conversion to sched::PdOptions / fleet::WorkerSpec. Private to the configuration's .cc files
// and the gateway wiring.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>

// Forward declarations only: config.h (included widely) includes this header.
namespace YAML {
class Node;
class Emitter;
}  // namespace YAML

namespace kvroute::fleet {
struct WorkerSpec;
}

namespace kvroute::sched {
struct PdOptions;
}

namespace kvroute::gateway {

namespace config_detail {
class MapReader;
}

// One worker's P/D fields (workers[i].tp, .gpus, .link, .link_bytes_per_s, .link_latency_s).
struct WorkerPdConfig {
  std::uint32_t tp = 0;    // tensor-parallel ranks; 0: the profile's GPU count
  std::uint32_t gpus = 0;  // GPUs occupied; 0: tp. Must be >= tp when both are set
  std::string link;        // the profile link remote KV arrives over; empty: the profile's first
  std::optional<double> link_bytes_per_s;  // per lane; replaces the profile link's bandwidth
  std::optional<double> link_latency_s;    // replaces the profile link's latency
};

// pd: when kvroute serve splits requests into a prefill leg and a decode leg.
struct PdConfig {
  // auto: on when any worker has role prefill or decode (an all-mixed fleet routes by the
  // scheduler policy, as before); on: every request is placed by the P/D decision; off:
  // never (roles only filter which workers the policy may pick).
  std::string mode = "auto";
  std::string rule = "cost";  // cost | dynamo_token_cap | llmd_non_cached (sched::PdRule)
  std::uint64_t token_cap = 5000;      // dynamo_token_cap: split above this many uncached tokens
  std::uint64_t non_cached_tokens = 0;  // llmd_non_cached: split at >= this; 0 = never
  double stall = 0.1;      // weight of the stall a local prefill causes D's running decodes
  // Weight of the chunk model of that stall (sched::PdOptions::chunk_stall; 0: off) and the
  // chunk size it assumes: the decode workers' step budget (vLLM's max_num_batched_tokens,
  // whose API-server default is 8192; serve cannot read it from the engines).
  double chunk_stall = 0;
  std::uint32_t chunk_tokens = 8192;
  double itl_slo_s = 0;    // drop options predicted above this ITL, seconds; 0: none
  // Weight of the queue a prefill leaves behind on the worker that prefills it
  // (sched::PdOptions::queue_behind, simulate's --pd-queue-behind): 1 charges each request
  // waiting there the whole prefill; 0 is the earlier rule without the term.
  double queue_behind = 1;
  // The prefill leg's whole exchange (connect to last byte), milliseconds: past it the
  // request decodes locally on its decode worker (llm-d's fallback). 0: timeouts.* only.
  std::int64_t prefill_timeout_ms = 30'000;
};

// Reads workers[i]'s P/D keys through the worker's reader.
std::expected<void, std::string> ParseWorkerPd(config_detail::MapReader& reader,
                                               WorkerPdConfig* out);
// Reads the `pd:` mapping.
std::expected<void, std::string> ParsePdSection(const YAML::Node& node, PdConfig* out);

// Range and name checks (`path`: "workers[i]" for error messages).
std::expected<void, std::string> ValidateWorkerPd(const WorkerPdConfig& worker,
                                                  const std::string& path);
std::expected<void, std::string> ValidatePd(const PdConfig& pd);

// The effective values, as keys of the current YAML map (worker) or as the `pd` map.
void EmitWorkerPd(const WorkerPdConfig& worker, YAML::Emitter& out);
void EmitPd(const PdConfig& pd, YAML::Emitter& out);

// The decision's options (REQUIRES: ValidatePd passed).
sched::PdOptions PdOptionsOf(const PdConfig& pd);

// Writes the worker's P/D fields into the spec fleet::RouterState::Add validates.
void ApplyWorkerPd(const WorkerPdConfig& worker, fleet::WorkerSpec* spec);

}  // namespace kvroute::gateway
