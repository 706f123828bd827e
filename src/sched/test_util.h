// Builders for hand-made snapshots and requests, shared by the sched unit tests only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "sched/types.h"

namespace kvroute::sched::testing {

inline constexpr char kModel[] = "llama";

// A healthy mixed worker serving kModel with no load, no cache and no rates.
inline WorkerSnapshot Worker(WorkerId id) {
  WorkerSnapshot w;
  w.id = id;
  w.name = "w" + std::to_string(id);
  w.models = {kModel};
  w.kv_capacity_blocks = 1000;
  return w;
}

// A request of `prompt_tokens` with 16-token blocks.
inline RequestProfile Request(std::uint64_t prompt_tokens) {
  RequestProfile r;
  r.model = kModel;
  r.prompt_tokens = prompt_tokens;
  r.block_size = 16;
  r.num_full_blocks = static_cast<std::uint32_t>(prompt_tokens / 16);
  return r;
}

// A cache view holding `gpu`, `cpu`, `disk`, `shared` consecutive blocks in each tier.
inline CacheView View(WorkerId worker, std::uint32_t gpu, std::uint32_t cpu = 0,
                      std::uint32_t disk = 0, std::uint32_t shared = 0) {
  CacheView v;
  v.worker = worker;
  v.depth_blocks = {gpu, cpu, disk, shared};
  v.any_depth_blocks = std::max({gpu, cpu, disk, shared});
  return v;
}

}  // namespace kvroute::sched::testing
