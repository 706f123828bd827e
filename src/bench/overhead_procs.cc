#include "bench/overhead_procs.h"

#include <sched.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvroute::bench {
namespace {

std::expected<int, std::string> ParseCpu(std::string_view s) {
  int v = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v >= CPU_SETSIZE) {
    return std::unexpected("bad CPU number '" + std::string(s) + "'");
  }
  return v;
}

}  // namespace

std::expected<std::vector<int>, std::string> ParseCpuList(const std::string& list) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos < list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    const std::string_view part(list.data() + pos, comma - pos);
    const auto dash = part.find('-');
    if (dash == std::string_view::npos) {
      auto cpu = ParseCpu(part);
      if (!cpu) return std::unexpected(cpu.error());
      out.push_back(*cpu);
    } else {
      auto lo = ParseCpu(part.substr(0, dash));
      auto hi = ParseCpu(part.substr(dash + 1));
      if (!lo) return std::unexpected(lo.error());
      if (!hi) return std::unexpected(hi.error());
      if (*hi < *lo) return std::unexpected("bad CPU range '" + std::string(part) + "'");
      for (int c = *lo; c <= *hi; ++c) out.push_back(c);
    }
    pos = comma + 1;
  }
  return out;
}

std::expected<void, std::string> PinProcess(pid_t pid, const std::vector<int>& cpus) {
  if (cpus.empty()) return {};
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  std::error_code ec;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  int pinned = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    pid_t tid = 0;
    std::from_chars(name.data(), name.data() + name.size(), tid);
    if (tid <= 0) continue;
    if (sched_setaffinity(tid, sizeof set, &set) != 0) {
      return std::unexpected("sched_setaffinity(" + std::to_string(tid) + ") failed");
    }
    ++pinned;
  }
  if (ec || pinned == 0)
    return std::unexpected("cannot list threads of pid " + std::to_string(pid));
  return {};
}

std::vector<pid_t> ProcessTree(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  if (!std::filesystem::exists("/proc/" + std::to_string(pid), ec)) return out;
  out.push_back(pid);
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    pid_t child = 0;
    auto [end, perr] = std::from_chars(name.data(), name.data() + name.size(), child);
    if (perr != std::errc() || end != name.data() + name.size() || child == pid) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');  // the name may hold spaces: fields resume after it
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (fields >> state >> ppid && ppid == pid) out.push_back(child);
  }
  return out;
}

std::expected<CpuPlacement, std::string> FairPlacement(int cpus) {
  if (cpus < 2) {
    return std::unexpected("--fair-pinning needs at least 2 CPUs (routers apart from the load)");
  }
  const std::string rest = cpus == 2 ? "0" : "0-" + std::to_string(cpus - 2);
  return CpuPlacement{rest, std::to_string(cpus - 1), rest};
}

std::optional<double> ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  double utime = -1, stime = -1;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) stime = std::atof(field.c_str());
  }
  if (utime < 0 || stime < 0) return std::nullopt;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::optional<SchedSeconds> ParseSchedStat(std::string_view line) {
  unsigned long long run_ns = 0, wait_ns = 0;
  const char* p = line.data();
  const char* end = p + line.size();
  auto [p1, e1] = std::from_chars(p, end, run_ns);
  if (e1 != std::errc() || p1 == end || *p1 != ' ') return std::nullopt;
  auto [p2, e2] = std::from_chars(p1 + 1, end, wait_ns);
  if (e2 != std::errc()) return std::nullopt;
  return SchedSeconds{static_cast<double>(run_ns) * 1e-9, static_cast<double>(wait_ns) * 1e-9};
}

std::optional<SchedSeconds> ProcessSchedSeconds(pid_t pid) {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec);
  if (ec) return std::nullopt;
  SchedSeconds sum;
  bool any = false;
  for (const auto& task : it) {
    std::ifstream in(task.path() / "schedstat");
    std::string line;
    if (!std::getline(in, line)) continue;  // the thread ended meanwhile
    if (auto s = ParseSchedStat(line)) {
      sum.run_s += s->run_s;
      sum.runq_s += s->runq_s;
      any = true;
    }
  }
  // A live process has run, so zero run time on every thread means the kernel (a sandbox such
  // as gVisor) does not account it: no reading rather than a run-queue wait of 0 that looks real.
  if (!any || sum.run_s <= 0) return std::nullopt;
  return sum;
}

std::optional<double> TreeCpuSeconds(pid_t pid) {
  const auto own = ProcessCpuSeconds(pid);
  if (!own) return std::nullopt;
  double sum = *own;
  for (pid_t p : ProcessTree(pid)) {
    if (p != pid) sum += ProcessCpuSeconds(p).value_or(0);  // a child that just exited: 0
  }
  return sum;
}

std::optional<SchedSeconds> TreeSchedSeconds(pid_t pid) {
  auto sum = ProcessSchedSeconds(pid);
  if (!sum) return std::nullopt;
  for (pid_t p : ProcessTree(pid)) {
    if (p == pid) continue;
    if (auto s = ProcessSchedSeconds(p)) {
      sum->run_s += s->run_s;
      sum->runq_s += s->runq_s;
    }
  }
  return sum;
}

std::string OverheadNginxConfig(const NginxOptions& options, int workers) {
  std::string conf = NginxConfig(options);
  if (workers <= 1) return conf;
  const std::string one = "master_process off;\nworker_processes 1;\n";
  const auto at = conf.find(one);
  if (at == std::string::npos) return conf;  // a config of another shape: left as it is
  // `user root`: run as root (the bench runs as root in CI), the master would otherwise drop
  // its workers to `nobody`, who cannot write the prefix folder; as another user nginx only
  // warns that the directive is ignored.
  conf.replace(
      at, one.size(),
      "master_process on;\nuser root;\nworker_processes " + std::to_string(workers) + ";\n");
  return conf;
}

OverheadRouters::OverheadRouters(std::string exe, std::string dir, int lanes)
    : exe_(std::move(exe)), dir_(std::move(dir)), lanes_(lanes) {
  if (exe_.empty()) exe_ = SelfExe();
}

std::expected<void, std::string> OverheadRouters::Start(const std::string& name,
                                                        const std::vector<SimInfo>& sims,
                                                        std::uint64_t seed,
                                                        double ready_timeout_s) {
  const std::string dir = std::filesystem::absolute(dir_ + "/" + RouterDirName(name)).string();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return std::unexpected("cannot create " + dir + ": " + ec.message());
  std::expected<StartedRouter, std::string> started;
  if (name == "nginx-rr") {
    auto n = NginxFor(sims, dir);
    if (!n) return std::unexpected(n.error());
    started = SpawnNginx(*n, OverheadNginxConfig(*n, lanes_));
  } else if (name.starts_with("kvroute:") && name.size() > 8) {
    ServeConfigOptions serve;
    serve.policy = name.substr(8);
    serve.seed = seed;
    serve.lanes = lanes_;
    started = SpawnServe(exe_, dir, ServeYaml(sims, serve), ready_timeout_s);
  } else {
    return std::unexpected("unknown router " + name + " (nginx-rr or kvroute:<preset>)");
  }
  if (!started) return std::unexpected(name + ": " + started.error());
  Router r{name, started->url, std::move(started->process)};
  if (!WaitHttpOk(r.url + "/health", ready_timeout_s)) {
    return std::unexpected(name + " never answered /health; see " + r.process.log_path());
  }
  routers_.push_back(std::move(r));
  return {};
}

void OverheadRouters::Stop() {
  for (auto& r : routers_) r.process.Stop();
  routers_.clear();
}

}  // namespace kvroute::bench
