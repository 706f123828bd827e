// Worker specs for Gateway::JoinWorker from the two sources `kvroute serve` has: a static
// `workers[]` entry of the YAML file, and a worker record registered in etcd (docs/etcd.md).
// Both give the same spec for the same worker, so a worker behaves alike however it joined.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "etcd/worker_record.h"
#include "fleet/worker_spec.h"
#include "gateway/config.h"

namespace kvroute::gateway {

// `block_size` is the router's (the index keys blocks of that size).
fleet::WorkerSpec SpecFromConfig(const WorkerConfig& worker, std::uint32_t block_size);
fleet::WorkerSpec SpecFromRecord(const etcd::WorkerRecord& record, std::uint32_t block_size);

}  // namespace kvroute::gateway
