#include "etcd/etcd_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "etcd/client.h"

namespace kvroute::etcd::testing {
namespace {

std::uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

EtcdProcess::EtcdProcess() {
  char tmpl[] = "/tmp/kvroute-etcd-XXXXXX";
  if (char* d = ::mkdtemp(tmpl)) dir_ = d;
  client_port_ = FreePort();
  peer_port_ = FreePort();
  while (peer_port_ == client_port_) peer_port_ = FreePort();
}

EtcdProcess::~EtcdProcess() {
  Stop();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

bool EtcdProcess::Available() { return ::access(kEtcdBinary, X_OK) == 0; }

std::string EtcdProcess::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(client_port_);
}

bool EtcdProcess::Start(std::string* error) {
  if (pid_ > 0) return true;
  const std::string client_url = endpoint();
  const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port_);
  const std::string log = dir_ + "/etcd.log";
  std::vector<std::string> args = {kEtcdBinary,
                                   "--name", "kvroute-test",
                                   "--data-dir", dir_ + "/data",
                                   "--listen-client-urls", client_url,
                                   "--advertise-client-urls", client_url,
                                   "--listen-peer-urls", peer_url,
                                   "--initial-advertise-peer-urls", peer_url,
                                   "--initial-cluster", "kvroute-test=" + peer_url,
                                   "--log-level", "warn"};
  pid_ = ::fork();
  if (pid_ == 0) {
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(kEtcdBinary, argv.data());
    ::_exit(127);
  }
  if (pid_ < 0) {
    *error = "fork failed";
    return false;
  }
  auto url = ParseEndpoints(client_url);
  EtcdClient probe(ClientOptions{.endpoints = *url,
                                 .connect_timeout = std::chrono::milliseconds(200),
                                 .call_timeout = std::chrono::milliseconds(1'000)});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    if (probe.RangePrefix("/").has_value()) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  *error = "etcd did not start: " + text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
  Kill();
  return false;
}

void EtcdProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void EtcdProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

}  // namespace kvroute::etcd::testing
