// kvroute config check: validates a `kvroute serve` configuration and prints it with every
// default resolved, then the scheduler policy's effective configuration and the failure mode.
// With --k8s DIR|-: checks rendered Kubernetes manifests instead (rules in src/k8s/check.h).
// Also home of the flags `serve` and `config check` share.
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/commands.h"
#include "gateway/config.h"
#include "gateway/gateway.h"
#include "gateway/shutdown_timeline.h"
#include "k8s/check.h"

namespace kvroute::app {

void AddGatewayConfigFlags(CLI::App* cmd, std::string* config_path, gateway::ConfigOverrides* o) {
  cmd->add_option("--config", *config_path, "YAML configuration file")->required();
  cmd->add_option("--host", o->host, "Address to listen on (overrides listen.host)");
  cmd->add_option("--port", o->port,
                  "Port to listen on; 0 picks a free one (overrides listen.port)");
  cmd->add_option("--policy", o->policy,
                  "Scheduler policy: a preset name or policy YAML (overrides scheduler.policy)");
  cmd->add_option("--log-level", o->log_level, "trace|debug|info|warn|error|off");
  cmd->add_option("--drain-timeout", o->drain_timeout_s,
                  "Seconds in-flight requests may run after SIGTERM (overrides drain_timeout_s)");
  cmd->add_option("--etcd", o->etcd,
                  "Follow workers registered in etcd: comma-separated client URLs (overrides "
                  "discovery.etcd.endpoints; combines with workers[]; docs/etcd.md)");
  cmd->add_option("--etcd-prefix", o->etcd_prefix,
                  "Key prefix of the worker records (overrides discovery.etcd.prefix)");
  cmd->add_option("--inference-pool", o->inference_pool,
                  "Follow the pods of this Gateway API InferencePool (overrides "
                  "discovery.kubernetes.pool; its namespace, api_url and models come from the "
                  "config; docs/kubernetes.md)");
  cmd->add_option("--epp", o->epp_address,
                  "Also serve Envoy ext_proc as the Gateway API Inference Extension's Endpoint "
                  "Picker, on host:port (default 0.0.0.0:9002; enables epp, overrides "
                  "epp.address)")
      ->expected(0, 1);
}

namespace {

// The `config` rule of `config check --k8s` (k8s/check.h): would `kvroute serve <serve_args>`
// accept `yaml` as its configuration file? The same flags, parse and validation serve runs.
std::optional<std::string> RefusalOfServeConfig(const std::string& yaml,
                                                const std::vector<std::string>& serve_args) {
  CLI::App serve;
  std::string ignored_path;  // the file is the mounted ConfigMap value given as `yaml`
  gateway::ConfigOverrides overrides;
  AddGatewayConfigFlags(&serve, &ignored_path, &overrides);
  std::vector<std::string> reversed(serve_args.rbegin(), serve_args.rend());  // CLI11's order
  try {
    serve.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return std::string("flags: ") + e.what();
  }
  auto config = gateway::ParseConfig(yaml);
  if (!config) return config.error();
  gateway::ApplyOverrides(overrides, &*config);
  if (auto ok = gateway::Validate(*config); !ok) return ok.error();
  return std::nullopt;
}

}  // namespace

void RegisterConfigCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("config", "Inspect kvroute serve configuration files");
  cmd->require_subcommand(1);
  auto* check = cmd->add_subcommand(
      "check",
      "Validate a configuration and print it with every default resolved, followed by the "
      "scheduler policy's effective configuration");
  auto path = std::make_shared<std::string>();
  auto overrides = std::make_shared<gateway::ConfigOverrides>();
  AddGatewayConfigFlags(check, path.get(), overrides.get());
  auto k8s_dir = std::make_shared<std::string>();
  auto k8s_options = std::make_shared<k8s::CheckOptions>();
  k8s_options->validate_serve_config = RefusalOfServeConfig;
  auto* config_opt = check->get_option("--config");
  config_opt->required(false);
  check->add_option("--k8s", *k8s_dir,
                    "Check rendered Kubernetes manifests (a file, a directory, a resources-only "
                    "kustomization, or - for stdin) instead of a kvroute configuration")
      ->excludes(config_opt);
  check->add_option("--teardown-buffer", k8s_options->teardown_buffer_s,
                    "With --k8s: seconds the drain invariant reserves after the shutdown timeout")
      ->capture_default_str();
  check->callback([path, overrides, exit_code, k8s_dir, k8s_options] {
    if (!k8s_dir->empty()) {
      *exit_code = k8s::RunCheck(*k8s_dir, *k8s_options, std::cout, std::cerr);
      return;
    }
    if (path->empty()) {
      std::cerr << "kvroute config check: --config or --k8s is required\n";
      *exit_code = 2;
      return;
    }
    auto config = gateway::LoadConfig(*path, *overrides);
    if (!config) {
      std::cerr << "kvroute config check: " << config.error() << "\n";
      *exit_code = 2;
      return;
    }
    auto gw = gateway::Gateway::Create(*config);
    if (!gw) {
      std::cerr << "kvroute config check: " << gw.error() << "\n";
      *exit_code = 2;
      return;
    }
    std::cout << "# kvroute serve: effective configuration (defaults resolved)\n"
              << gateway::EffectiveYaml(*config) << "# scheduler policy '" << (*gw)->policy().name()
              << "' (effective)\n"
              << (*gw)->policy().effective_config();
    if (!(*gw)->policy().effective_config().ends_with("\n")) std::cout << "\n";
    std::cout << "# failure_mode: " << gateway::FailureModeName(config->failure_mode)
              << (config->failure_mode == gateway::FailureMode::kFailOpen
                      ? " (scheduling errors route by load alone)"
                      : " (scheduling errors answer 503)")
              << "\n";
    // Broken shutdown invariants are warnings (the configuration runs), on stderr.
    for (const std::string& w : gateway::ShutdownWarnings(*config)) {
      std::cerr << "kvroute config check: warning: " << w << "\n";
    }
    *exit_code = 0;
  });
}

}  // namespace kvroute::app
