// A tiny blocking HTTP/1.1 client on POSIX sockets for the net and sim unit tests, kept free
// of Beast so test TUs compile fast. Loopback only; every read has a deadline.
//
// Thread safety: one instance per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace kvroute::net::testing {

struct ParsedResponse {
  int status = 0;
  std::string head;  // status line + headers
  std::string body;  // de-chunked
  bool chunked = false;
  bool complete = false;  // the whole body arrived (content-length or last chunk)
};

class TestClient {
 public:
  TestClient() = default;
  ~TestClient();
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool Connect(std::uint16_t port);
  bool Send(const std::string& bytes);
  void Close();
  // Half-closes (shutdown SHUT_WR) — what a client that hangs up looks like to the server.
  void ShutdownWrite();

  // Reads one response. Stops at the end of the body, at EOF or after `timeout`.
  ParsedResponse ReadResponse(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Reads exactly up to `n` bytes or until EOF/timeout; returns them raw.
  std::string ReadSome(std::size_t n, std::chrono::milliseconds timeout);
  // True when the server closed the connection (EOF or reset) within `timeout`.
  bool WaitClosed(std::chrono::milliseconds timeout);

  static std::string Get(const std::string& path, bool keep_alive = true);
  static std::string Post(const std::string& path, const std::string& body, bool keep_alive = true);

 private:
  // Appends available bytes to pending_; false on EOF/error/timeout.
  bool Fill(std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  std::string pending_;
};

}  // namespace kvroute::net::testing
