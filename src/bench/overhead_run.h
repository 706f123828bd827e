// `kvroute bench overhead` end to end: start N fast sims, put every router in front of them
// at once (overhead_procs.h), then, for each concurrency level, run the same closed-loop load
// (overhead_load.h) against each target in turn — direct, nginx-rr, kvroute:<policy>,
// kvroute:round_robin — and summarise it (overhead.h).
//
// Fast sims: --speedup divides every simulated step, so a large one (the default 1000) makes
// the model server answer in well under a millisecond of compute and the proxies, not the
// engine model, are what differs between targets. Prompts are distinct (a pool cycled by
// request index) so a prefix-aware policy spreads them as a load balancer would.
//
// Ownership: RunOverhead owns every child process it starts and stops them all before it
// returns (and on SIGINT/SIGTERM once the caller installed InstallChildCleanupHandlers).
// Thread safety: call from one thread.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "bench/overhead.h"

namespace kvroute::bench {

struct OverheadOptions {
  std::string exe;  // the kvroute binary; empty: this one
  // The kvroute binary of the kvroute:<policy> targets; empty: `exe`. Another build here puts
  // two builds of `kvroute serve` in front of the same sims, in one run (before/after).
  std::string router_exe;
  int workers = 2;
  std::string profile;    // empty: the sims' default
  double speedup = 1000;  // sims run this much faster than real time
  std::vector<int> concurrency = {1, 8, 32};
  int requests = 1000;        // recorded per level
  int warmup_requests = 100;  // per level, before the recorded ones (connections, caches)
  double duration_s = 20;     // cap per level, warm-up included
  std::uint32_t prompt_tokens = 128;
  std::uint32_t output_tokens = 32;
  bool stream = true;
  int prompt_pool = 64;                      // distinct prompts, cycled
  std::string policy = "predicted_latency";  // kvroute's default preset
  // Targets in the order each level runs them. Empty: direct, nginx-rr, kvroute:<policy>,
  // and kvroute:round_robin unless the policy is round_robin.
  std::vector<std::string> targets;
  std::string out_dir = "bench-results/overhead";  // logs under <out>/cluster/
  std::string label = "overhead";
  std::uint64_t seed = 1;
  double request_timeout_s = 30;
  // CPU placement (taskset lists, "" = leave to the OS): the load generator (this process),
  // the routers, the sims.
  std::string cpus_client, cpus_router, cpus_sims;
  // The fair side-by-side protocol: every router on the last CPU, client and sims on the
  // others (FairPlacement); a --cpus-* list given explicitly wins over it.
  bool fair_pinning = false;
  // Event-loop threads of every router alike: kvroute serve's lanes (listen.http_threads) and
  // nginx's worker processes. 0: as many as the routers' CPUs when they are pinned, else 1.
  int router_lanes = 0;
  bool progress = true;
};

// The default target list for a policy.
std::vector<std::string> DefaultOverheadTargets(const std::string& policy);

// The routers' lane count a run uses: `router_lanes` when > 0, else the number of CPUs in
// `cpus_router` (after --fair-pinning), else 1.
int EffectiveRouterLanes(int router_lanes, const std::vector<int>& router_cpus);

// Errors are setup failures (a child that does not start, bad flags); request failures are
// counted in the levels.
std::expected<OverheadReport, std::string> RunOverhead(const OverheadOptions& options);

// Writes <dir>/<label>.json and <dir>/<label>.csv.
std::expected<void, std::string> WriteOverheadFiles(const OverheadReport& report,
                                                    const std::string& dir);

}  // namespace kvroute::bench
