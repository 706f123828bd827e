// kvroute_epp_testserver ENDPOINT...: an EppServer on 127.0.0.1 (free port) whose picker
// answers each request with the endpoints rotated round robin (the first is the pick, the rest
// its fallbacks), except: header `x-test-reject: 429` sheds the request. Prints
// "listening PORT", runs until stdin closes. For tests/integration/extproc only.
#include <atomic>
#include <iostream>
#include <string>
#include <vector>

#include "extproc/epp_server.h"

int main(int argc, char** argv) {
  using namespace kvroute::extproc;
  std::vector<std::string> endpoints(argv + 1, argv + argc);
  auto next = std::make_shared<std::atomic<size_t>>(0);
  Picker picker = [endpoints, next](const PickRequest& r) {
    PickResult out;
    if (auto it = r.headers.find("x-test-reject"); it != r.headers.end()) {
      out.reject_status = std::stoi(it->second);
      out.reject_message = "request evicted by flow control";
      return out;
    }
    const std::vector<std::string>& pool = r.subset ? *r.subset : endpoints;
    size_t start = pool.empty() ? 0 : next->fetch_add(1) % pool.size();
    for (size_t i = 0; i < pool.size(); ++i) out.endpoints.push_back(pool[(start + i) % pool.size()]);
    return out;
  };
  auto server = EppServer::Start({.address = "127.0.0.1:0", .max_body_bytes = 1 << 20}, picker);
  if (!server) {
    std::cerr << server.error() << "\n";
    return 1;
  }
  std::cout << "listening " << (*server)->port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  (*server)->Shutdown(std::chrono::milliseconds(500));
  return 0;
}
