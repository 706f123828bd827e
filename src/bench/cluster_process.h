// Child processes of `kvroute bench compare` / `kvroute demo`: fork/exec with stdout and stderr
// sent to a log file (read back for the ready line, so a chatty child never blocks on a full
// pipe), stop by pid (SIGTERM, then SIGKILL after a bound), and a process-wide registry of
// live children that a SIGINT/SIGTERM handler kills, so no exit path leaves an orphan.
//
// Each child runs in its own process group (signals go to the whole group, which covers
// anything it forks) and asks the kernel for SIGKILL if the parent thread that forked it dies
// (PR_SET_PDEATHSIG), which covers a parent killed with SIGKILL.
//
// Ownership: a ChildProcess owns its pid; its destructor stops it. Thread safety: spawn and
// stop from one thread (the orchestrating one); the signal handler only reads the registry.
#pragma once

#include <sys/types.h>

#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::bench {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() { Stop(); }
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // argv[0] is the program path. stdout and stderr are appended to `log_path`.
  static std::expected<ChildProcess, std::string> Spawn(const std::vector<std::string>& argv,
                                                        const std::string& log_path);

  // Waits until a line of the log starts with `prefix` and returns it; an error when the child
  // exits first or `timeout_s` passes (the error names the log file).
  std::expected<std::string, std::string> WaitForLine(std::string_view prefix, double timeout_s);

  // SIGTERM to the group, SIGKILL after `grace_s`; reaps the child. Idempotent.
  void Stop(double grace_s = 5.0);

  bool running();  // false once the child exited (reaps it)
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

// Installs SIGINT/SIGTERM handlers that SIGKILL every live child's group and exit with
// 128 + signal. While DeferSignals(true) is in effect the handler only records the signal
// (see SignalReceived), so a command waiting for Ctrl-C can stop its children gracefully.
void InstallChildCleanupHandlers();
void DeferSignals(bool defer);
int SignalReceived();  // 0 when none

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
std::expected<int, std::string> FreeLoopbackPort();

// GET `url` until it answers 2xx or `timeout_s` passes.
bool WaitHttpOk(const std::string& url, double timeout_s);

// The path of the running binary (/proc/self/exe resolved).
std::string SelfExe();

}  // namespace kvroute::bench
