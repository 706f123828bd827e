// kvroute serve (the cache-aware gateway) and kvroute config check: flag parsing and process
// lifecycle (signals, ready line, exit status) around gateway::Gateway.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "app/commands.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "gateway/config.h"
#include "gateway/gateway.h"
#include "gateway/shutdown_timeline.h"
#ifdef KVROUTE_HAVE_EPP
#include "extproc/epp_router.h"
#include "extproc/epp_server.h"
#endif

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

  for (const std::string& w : gateway::ShutdownWarnings(config)) spdlog::warn("{}", w);
  const std::string host = config.host;
  const std::size_t workers = config.workers.size();
  const gateway::GatewayConfig::Epp epp_config = config.epp;
  const gateway::KubernetesDiscoveryConfig kubernetes = config.kubernetes;
  const auto epp_body_limit = static_cast<std::size_t>(config.limits.max_body_bytes);
  const auto grace = std::chrono::milliseconds(static_cast<std::int64_t>(config.shutdown_grace_s * 1000));
  const auto drain = std::chrono::milliseconds(static_cast<std::int64_t>(config.drain_timeout_s * 1000));
  const std::uint64_t seed = config.scheduler_seed;
#ifndef KVROUTE_HAVE_EPP
  if (epp_config.enabled) {
    std::cerr << "kvroute serve: --epp needs a build with gRPC (libgrpc++-dev; scripts/setup.sh)\n";
    return 2;
  }
#endif
  auto gw = gateway::Gateway::Create(std::move(config));
  if (!gw) {
    std::cerr << "kvroute serve: " << gw.error() << "\n";
    return 2;
  }
  if (auto ok = (*gw)->Start(); !ok) {
    std::cerr << "kvroute serve: " << ok.error() << "\n";
    return 2;
  }
#ifdef KVROUTE_HAVE_EPP
  // The Endpoint Picker beside the HTTP gateway (not instead of it): the HTTP side keeps
  // serving /health, /ready, /metrics and /admin, which probes, Prometheus and operators need.
  std::unique_ptr<extproc::EppServer> epp;
  // Declared before the watcher that fills it, so the watcher stops first.
  auto epp_policy = std::make_shared<extproc::EppPolicy>(epp_config.objectives);
  std::unique_ptr<k8s::ObjectiveWatcher> objective_watcher;
  if (epp_config.enabled && epp_config.watch_objectives) {
    auto watcher = extproc::WatchPoolObjectives(kubernetes, epp_policy.get());
    if (!watcher) {
      std::cerr << "kvroute serve: " << watcher.error() << "\n";
      return 2;
    }
    objective_watcher = std::move(*watcher);
  }
  if (epp_config.enabled) {
    auto started = extproc::EppServer::Start(
        {.address = epp_config.address, .max_body_bytes = epp_body_limit},
        extproc::MakeRouterSessions(
            (*gw)->request_path(),
            {.seed = seed,
             .admission = {.objective_priority = epp_config.objectives,
                           .queue_depth = epp_config.saturation_queue_depth,
                           .kv_usage = epp_config.saturation_kv_usage,
                           .metrics_max_age_s = epp_config.saturation_metrics_max_age_s},
             .policy = epp_policy}));
    if (!started) {
      std::cerr << "kvroute serve: epp: " << started.error() << "\n";
      return 2;
    }
    epp = std::move(*started);
    const std::string epp_host = epp_config.address.substr(0, epp_config.address.rfind(':'));
    std::cout << "kvroute serve epp listening on " << epp_host << ":" << epp->port() << std::endl;
  }
#else
  (void)epp_body_limit;
  (void)seed;
  (void)kubernetes;
#endif
  std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  // The ready line: tests and scripts read the address from it.
  std::cout << "kvroute serve listening on http://" << shown << ":" << (*gw)->port()
            << " workers=" << workers << " policy=" << (*gw)->policy().name()
            << " block_size=" << (*gw)->block_size() << std::endl;
  const int signal_number = signals.Wait();
  std::cerr << "kvroute serve: signal " << signal_number << ", draining" << std::endl;
#ifdef KVROUTE_HAVE_EPP
  // The picker drains alongside: NOT_SERVING at once (Envoy's health check moves away), open
  // streams get the same grace and drain timeout as HTTP requests.
  std::thread epp_drain;
  if (epp) {
    epp->SetReady(false);
    epp_drain = std::thread([&epp, grace, drain] {
      std::this_thread::sleep_for(grace);
      epp->Shutdown(drain);
    });
  }
#else
  (void)grace;
  (void)drain;
#endif
  std::size_t cut = (*gw)->Drain();
#ifdef KVROUTE_HAVE_EPP
  if (epp_drain.joinable()) epp_drain.join();
#endif
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
