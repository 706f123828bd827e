// kvroute serve (the cache-aware gateway) and kvroute config check: flag parsing and process
// lifecycle (signals, ready line, exit status) around gateway::Gateway.
#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <memory>
#include <string>

#include "app/commands.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "gateway/config.h"
#include "gateway/gateway.h"

namespace kvroute::app {
namespace {

struct ServeFlags {
  std::string config_path;
  gateway::ConfigOverrides overrides;
};

int RunServe(gateway::GatewayConfig config) {
  if (!InitLogging(config.log_level, "serve")) {
    std::cerr << "kvroute serve: unknown log level '" << config.log_level << "'\n";
    return 2;
  }
  // Before any thread starts, so every thread inherits the blocked mask.
  StopSignals signals;

  const std::string host = config.host;
  const std::size_t workers = config.workers.size();
  auto gw = gateway::Gateway::Create(std::move(config));
  if (!gw) {
    std::cerr << "kvroute serve: " << gw.error() << "\n";
    return 2;
  }
  if (auto ok = (*gw)->Start(); !ok) {
    std::cerr << "kvroute serve: " << ok.error() << "\n";
    return 2;
  }
  std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  // The ready line: tests and scripts read the address from it.
  std::cout << "kvroute serve listening on http://" << shown << ":" << (*gw)->port()
            << " workers=" << workers << " policy=" << (*gw)->policy().name()
            << " block_size=" << (*gw)->block_size() << std::endl;
  const int signal_number = signals.Wait();
  std::cerr << "kvroute serve: signal " << signal_number << ", draining" << std::endl;
  std::size_t cut = (*gw)->Drain();
  std::cerr << "kvroute serve: stopped (" << cut << " request(s) cut at the drain deadline)"
            << std::endl;
  return 0;
}

}  // namespace

void RegisterServeCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "serve",
      "Run the KV-cache-aware gateway: OpenAI API in front of model servers (vLLM, SGLang or "
      "kvroute sim), routing each request where its prefix is cached and load allows.");
  auto flags = std::make_shared<ServeFlags>();
  AddGatewayConfigFlags(cmd, &flags->config_path, &flags->overrides);
  cmd->callback([flags, exit_code] {
    auto config = gateway::LoadConfig(flags->config_path, flags->overrides);
    if (!config) {
      std::cerr << "kvroute serve: " << config.error() << "\n";
      *exit_code = 2;
      return;
    }
    *exit_code = RunServe(std::move(*config));
  });
}

}  // namespace kvroute::app
