// kvroute_k8s_pool_watch API_URL NAMESPACE POOL MODEL [TOKEN_FILE] [--endpointslices=SERVICE]:
// a PoolWatcher (following the pool's pods, or SERVICE's EndpointSlices) whose sink
// prints each membership call ("join NAME URL", "drain NAME", "leave NAME") and whose steps
// print as "step …", one line each, flushed; runs until stdin closes. For
// tests/integration/k8s/discovery_test.py (a recorded-shape fake API server) only.
#include <iostream>
#include <mutex>
#include <string>

#include "k8s/pool_watcher.h"

namespace {

std::mutex out_mu;
void Print(const std::string& line) {
  std::lock_guard lock(out_mu);
  std::cout << line << std::endl;
}

struct PrintingSink final : kvroute::k8s::MembershipSink {
  std::expected<void, std::string> JoinWorker(kvroute::fleet::WorkerSpec spec) override {
    Print("join " + spec.name + " " + spec.base_url);
    return {};
  }
  bool DrainWorker(std::string_view name) override {
    Print("drain " + std::string(name));
    return true;
  }
  bool LeaveWorker(std::string_view name) override {
    Print("leave " + std::string(name));
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: kvroute_k8s_pool_watch API_URL NAMESPACE POOL MODEL [TOKEN_FILE] [--endpointslices=SERVICE]\n";
    return 2;
  }
  PrintingSink sink;
  kvroute::k8s::PoolWatcherOptions o;
  o.api_url = argv[1];
  o.namespace_name = argv[2];
  o.pool_name = argv[3];
  o.models = {argv[4]};
  for (int i = 5; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.starts_with("--endpointslices=")) {
      o.source = kvroute::k8s::DiscoverySource::kEndpointSlices;
      o.service = arg.substr(arg.find('=') + 1);
    } else {
      o.token_file = arg;
    }
  }
  o.min_backoff = std::chrono::milliseconds(50);
  o.on_step = [](const std::string& s, bool) { Print("step " + s); };
  auto w = kvroute::k8s::PoolWatcher::Start(o, &sink);
  if (!w) {
    std::cerr << w.error() << "\n";
    return 2;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  (*w)->Stop();
  return 0;
}
