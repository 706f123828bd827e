// Process plumbing of `kvroute bench overhead`: the routers it starts beside each other in
// front of one set of sims (nginx round robin, one `kvroute serve` per policy), and CPU
// placement (taskset-style lists applied to every thread of a process).
//
// All routers run at the same time so that the targets can be measured interleaved, level by
// level, on the same warm sims: drift in the machine's load then hits every target alike.
// An idle router costs little (nginx nothing; kvroute serve its metrics scrapes and the KV
// events of the traffic sent through the others, which it would ingest in production too).
//
// Ownership: OverheadRouters owns its children and stops them in its destructor.
// Thread safety: one thread.
#pragma once

#include <sys/types.h>

#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cluster.h"
#include "bench/cluster_process.h"
#include "bench/nginx.h"

namespace kvroute::bench {

// "0", "0-3", "0,2,5-7" → CPU numbers in order; errors name the bad part. Empty → empty.
std::expected<std::vector<int>, std::string> ParseCpuList(const std::string& list);

// Sets the CPU affinity of every thread of process `pid` (from /proc/<pid>/task), so threads
// a server started before it was pinned move too. Threads started later inherit the mask.
std::expected<void, std::string> PinProcess(pid_t pid, const std::vector<int>& cpus);

// `pid` and its direct children (nginx's master and its worker processes), from the parent
// field of /proc/<child>/stat. Just `pid` when it has none; empty when it does not exist.
std::vector<pid_t> ProcessTree(pid_t pid);

// The fair side-by-side placement of `bench overhead --fair-pinning` on a machine with `cpus`
// CPUs (>= 2): every router on the last CPU, the load generator and the sims on the others,
// so nginx and kvroute get the same CPU budget and neither competes with the load it serves.
struct CpuPlacement {
  std::string client, router, sims;  // taskset lists
};
std::expected<CpuPlacement, std::string> FairPlacement(int cpus);

// User + system CPU seconds process `pid` (all its threads) has used so far, from
// /proc/<pid>/stat (clock-tick resolution); nullopt when it cannot be read.
std::optional<double> ProcessCpuSeconds(pid_t pid);

// Scheduler time of a process: seconds its threads ran on a CPU, and seconds they were
// runnable but waited for one (run-queue wait). A proxy whose run-queue wait is large next to
// its run time was starved by other processes sharing its CPUs: its latency and rate then
// measure its scheduler share, not its own cost.
struct SchedSeconds {
  double run_s = 0;
  double runq_s = 0;
};
// One /proc/<pid>/task/<tid>/schedstat line ("<run ns> <wait ns> <timeslices>").
std::optional<SchedSeconds> ParseSchedStat(std::string_view line);
// Sum over the threads process `pid` has now (threads that already exited are not counted);
// nullopt when none can be read (no such process, or a kernel without schedstat).
std::optional<SchedSeconds> ProcessSchedSeconds(pid_t pid);

// The same two, summed over ProcessTree(pid): nginx with worker processes does its work in
// the children. nullopt when the process itself cannot be read.
std::optional<double> TreeCpuSeconds(pid_t pid);
std::optional<SchedSeconds> TreeSchedSeconds(pid_t pid);

// nginx's configuration for `bench overhead` (bench/nginx.h's) with `workers` worker
// processes: 1 keeps nginx in one process (master_process off); more turns the master on,
// since nginx ignores worker_processes without it.
std::string OverheadNginxConfig(const NginxOptions& options, int workers);

class OverheadRouters {
 public:
  struct Router {
    std::string name;  // "nginx-rr", "kvroute:<policy>"
    std::string url;   // "http://127.0.0.1:P"
    ChildProcess process;
  };

  // `exe`: the kvroute binary; `dir`: logs and configs (one folder per router); `lanes`: the
  // event-loop threads of every router alike — kvroute serve's lanes and nginx's worker
  // processes (0: each one's default, kvroute one lane per CPU and nginx one process).
  OverheadRouters(std::string exe, std::string dir, int lanes = 0);
  ~OverheadRouters() { Stop(); }
  OverheadRouters(const OverheadRouters&) = delete;
  OverheadRouters& operator=(const OverheadRouters&) = delete;

  // Starts `name` ("nginx-rr" or "kvroute:<preset>") in front of `sims` and waits until it
  // answers /health. kvroute serve's configuration is ServeYaml's (bench/cluster.h) with
  // `lanes`: every worker carries its sim's profile and speedup, as in `bench compare`.
  std::expected<void, std::string> Start(const std::string& name, const std::vector<SimInfo>& sims,
                                         std::uint64_t seed, double ready_timeout_s);
  void Stop();

  std::vector<Router>& routers() { return routers_; }

 private:
  std::string exe_, dir_;
  int lanes_ = 0;
  std::vector<Router> routers_;
};

}  // namespace kvroute::bench
