// kvroute_k8s_objective_watch API_URL NAMESPACE POOL [TOKEN_FILE]: an ObjectiveWatcher whose
// sink prints each set it is handed ("objectives GROUP: NAME=PRIORITY …",
// "rewrites GROUP: OBJECT#RULE[MODEL,…->TARGET*WEIGHT,…] …") and whose steps print as
// "step …", one line each, flushed; runs until stdin closes. For
// tests/integration/k8s/objective_discovery_test.py (a recorded-shape fake API server) only.
#include <iostream>
#include <mutex>
#include <string>

#include "k8s/objective_watcher.h"

namespace {

std::mutex out_mu;
void Print(const std::string& line) {
  std::lock_guard lock(out_mu);
  std::cout << line << std::endl;
}

struct PrintingSink final : kvroute::k8s::ServingObjectSink {
  void SetObjectives(std::string_view group, std::vector<kvroute::k8s::Objective> objectives) override {
    std::string line = "objectives " + std::string(group) + ":";
    for (const auto& o : objectives) line += " " + o.name + "=" + std::to_string(o.priority);
    Print(line);
  }
  void SetRewrites(std::string_view group, std::vector<kvroute::k8s::RewriteRule> rules) override {
    std::string line = "rewrites " + std::string(group) + ":";
    for (const auto& r : rules) {
      line += " " + r.object + "#" + std::to_string(r.index) + "[";
      for (const auto& m : r.models) line += m + ",";
      line += "->";
      for (const auto& t : r.targets) line += t.model + "*" + std::to_string(t.weight) + ",";
      line += "]";
    }
    Print(line);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: kvroute_k8s_objective_watch API_URL NAMESPACE POOL [TOKEN_FILE]\n";
    return 2;
  }
  PrintingSink sink;
  kvroute::k8s::ObjectiveWatcherOptions o;
  o.api.api_url = argv[1];
  o.api.namespace_name = argv[2];
  o.api.pool_name = argv[3];
  if (argc > 4) o.api.token_file = argv[4];
  o.api.min_backoff = std::chrono::milliseconds(50);
  o.not_found_backoff = std::chrono::milliseconds(500);
  o.api.on_step = [](const std::string& s, bool) { Print("step " + s); };
  auto w = kvroute::k8s::ObjectiveWatcher::Start(o, &sink);
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
