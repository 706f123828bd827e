#include "net/test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace kvroute::net::testing {

TestClient::~TestClient() { Close(); }

bool TestClient::Connect(std::uint16_t port) {
  Close();
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Close();
    return false;
  }
  return true;
}

bool TestClient::Send(const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

void TestClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  pending_.clear();
}

void TestClient::ShutdownWrite() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

bool TestClient::Fill(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0 || fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
  char buf[16384];
  ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
  if (n <= 0) return false;
  pending_.append(buf, static_cast<std::size_t>(n));
  return true;
}

ParsedResponse TestClient::ReadResponse(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  ParsedResponse r;
  std::size_t end;
  while ((end = pending_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill(deadline)) return r;
  }
  r.head = pending_.substr(0, end + 2);
  pending_.erase(0, end + 4);
  r.status = std::atoi(r.head.c_str() + 9);
  std::string lower = r.head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (r.status == 100) return ReadResponse(timeout);
  r.chunked = lower.find("transfer-encoding: chunked") != std::string::npos;
  if (!r.chunked) {
    std::size_t len = 0;
    if (auto p = lower.find("content-length:"); p != std::string::npos) {
      len = std::strtoul(lower.c_str() + p + 15, nullptr, 10);
    }
    while (pending_.size() < len) {
      if (!Fill(deadline)) {
        r.body = std::move(pending_);
        pending_.clear();
        return r;
      }
    }
    r.body = pending_.substr(0, len);
    pending_.erase(0, len);
    r.complete = true;
    return r;
  }
  for (;;) {
    std::size_t eol;
    while ((eol = pending_.find("\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return r;
    }
    std::size_t size = std::strtoul(pending_.c_str(), nullptr, 16);
    while (pending_.size() < eol + 2 + size + 2) {
      if (!Fill(deadline)) return r;
    }
    r.body.append(pending_, eol + 2, size);
    pending_.erase(0, eol + 2 + size + 2);
    if (size == 0) {
      r.complete = true;
      return r;
    }
  }
}

std::string TestClient::ReadSome(std::size_t n, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pending_.size() < n && Fill(deadline)) {
  }
  std::string out = pending_.substr(0, n);
  pending_.erase(0, out.size());
  return out;
}

bool TestClient::WaitClosed(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || fd_ < 0) return fd_ < 0;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
}

std::string TestClient::Get(const std::string& path, bool keep_alive) {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
         (keep_alive ? "" : "Connection: close\r\n") + "\r\n";
}

std::string TestClient::Post(const std::string& path, const std::string& body, bool keep_alive) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         (keep_alive ? "" : "Connection: close\r\n") +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace kvroute::net::testing
