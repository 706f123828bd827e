// Fleet: which workers a simulation runs (profiles and engine settings per worker) and what
// happens to them over virtual time (failures, restarts, workers added mid-run).
//
// Sources:
//   flags   --workers N --profile P (a homogeneous fleet), and schedule entries
//           --fail "t=120s,worker=3"  --restart "t=200s,worker=3"  --add
//           "t=300s,count=8[,profile=P]"
//   YAML    fleet:   [{count: 4, profile: qwen3-32b-tp2-h100, role: mixed|prefill|decode,
//                      link: rdma-400g (one of the profile's links), tp: 2 (must be the
//                      profile's hardware.num_gpus), gpus: 2 (>= tp; default tp),
//                      engine: {max_num_seqs, max_num_batched_tokens, num_gpu_blocks,
//                               num_cpu_blocks, block_size, enable_chunked_prefill,
//                               enable_prefix_caching}}, ...]
//           changes: [{t: 120s, fail: 3}, {t: 200s, restart: 3}, {t: 300s, add: 8, profile: P}]
// Times are "<number>[ns|us|ms|s|m|h]" (no unit = seconds). Worker ids are dense from 0 in
// fleet order; added workers get the next ids.
//
// Errors are returned as text naming the offending entry, never thrown.
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "common/duration.h"
#include "common/types.h"
#include "engine/engine.h"
#include "engine/profile.h"
#include "sched/types.h"

namespace kvroute::simulate {

// One worker's model server: a profile and the engine settings it runs with.
struct WorkerSpec {
  engine::Profile profile;
  engine::EngineConfig config;  // config.kv_link.name: the YAML's `link`
  sched::Role role = sched::Role::kMixed;
  std::uint32_t gpus = 0;  // 0: the profile's num_gpus
};

struct FleetChange {
  enum class Kind { kFail, kRestart, kAdd };
  Kind kind = Kind::kFail;
  Nanos at{0};
  WorkerId worker = 0;  // kFail / kRestart
  int count = 0;        // kAdd
  WorkerSpec spec;      // kAdd: the added workers' spec
};

const char* FleetChangeKindName(FleetChange::Kind kind);

struct Fleet {
  std::vector<WorkerSpec> workers;   // initial workers, id = index
  std::vector<FleetChange> changes;  // sorted by time (stable: equal times keep their order)
};

// One --fail/--restart/--add value. `base` is the spec added workers get without profile=.
std::expected<FleetChange, std::string> ParseChangeFlag(FleetChange::Kind kind,
                                                        std::string_view text,
                                                        const WorkerSpec& base);

// A YAML document with `fleet:` and optional `changes:`. `base` supplies the engine settings
// entries do not override (its profile is used when an entry names none).
std::expected<Fleet, std::string> ParseFleetYaml(std::string_view yaml, const WorkerSpec& base);

// Checks what the simulator relies on: at least one worker, one block size across the fleet
// (the router keys prompts once), failure/restart ids that exist by then.
std::expected<void, std::string> ValidateFleet(const Fleet& fleet);

// Sorts changes by time, keeping the order of equal times.
void SortChanges(Fleet* fleet);

}  // namespace kvroute::simulate
