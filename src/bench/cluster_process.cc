#include "bench/cluster_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "client/blocking_http_client.h"

namespace kvroute::bench {
namespace {

// The registry the signal handler reads: plain atomics, no allocation (async-signal-safe).
constexpr int kMaxChildren = 64;
std::array<std::atomic<pid_t>, kMaxChildren> g_children{};
std::atomic<bool> g_defer{false};
std::atomic<int> g_signal{0};

void Register(pid_t pid) {
  for (auto& slot : g_children) {
    pid_t expected = 0;
    if (slot.compare_exchange_strong(expected, pid)) return;
  }
}

void Unregister(pid_t pid) {
  for (auto& slot : g_children) {
    pid_t expected = pid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

void OnSignal(int sig) {
  g_signal.store(sig);
  if (g_defer.load()) return;
  for (auto& slot : g_children) {
    const pid_t pid = slot.load();
    if (pid > 0) kill(-pid, SIGKILL);
  }
  _exit(128 + sig);
}

using Clock = std::chrono::steady_clock;

}  // namespace

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), log_path_(std::move(other.log_path_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Stop();
    pid_ = std::exchange(other.pid_, -1);
    log_path_ = std::move(other.log_path_);
  }
  return *this;
}

std::expected<ChildProcess, std::string> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                                             const std::string& log_path) {
  if (argv.empty()) return std::unexpected("empty command line");
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (the parent has other threads).
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return std::unexpected("cannot open " + log_path);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return std::unexpected("fork failed");
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  setpgid(pid, pid);  // also from the parent, so a signal to the group never races the child
  Register(pid);
  ChildProcess child;
  child.pid_ = pid;
  child.log_path_ = log_path;
  return child;
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    kill(-pid_, SIGKILL);  // anything the child left in its group
    Unregister(pid_);
    pid_ = -1;
    return false;
  }
  return true;
}

std::expected<std::string, std::string> ChildProcess::WaitForLine(std::string_view prefix,
                                                                  double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    std::ifstream in(log_path_);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with(prefix)) return line;
    }
    if (!running()) return std::unexpected("exited before ready; see " + log_path_);
    if (Clock::now() > deadline) return std::unexpected("not ready in time; see " + log_path_);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ChildProcess::Stop(double grace_s) {
  if (pid_ <= 0) return;
  kill(-pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::duration<double>(grace_s);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (waitpid(pid_, &status, WNOHANG) == 0) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  kill(-pid_, SIGKILL);  // stragglers of the group, if any
  Unregister(pid_);
  pid_ = -1;
}

void InstallChildCleanupHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void DeferSignals(bool defer) { g_defer.store(defer); }
int SignalReceived() { return g_signal.load(); }

std::expected<int, std::string> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return std::unexpected("bind to 127.0.0.1:0 failed");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

bool WaitHttpOk(const std::string& url, double timeout_s) {
  client::ClientOptions options;
  options.timeouts.connect = std::chrono::milliseconds(1000);
  options.timeouts.total = std::chrono::milliseconds(2000);
  client::BlockingHttpClient http(options);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < deadline) {
    auto request = client::MakeRequest("GET", url);
    if (!request) return false;
    auto response = http.Send(*request);
    if (response && response->status >= 200 && response->status < 300) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string SelfExe() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : path.string();
}

}  // namespace kvroute::bench
