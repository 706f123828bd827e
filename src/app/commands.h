// The kvroute subcommands. Each Register*Command adds one CLI11 subcommand whose callback
// runs the command and stores its exit status in *exit_code. Logic lives in the modules;
// these files only parse flags and call into them.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kvroute::gateway {
struct ConfigOverrides;
}

namespace kvroute::app {

void RegisterVersionCommand(CLI::App& app, int* exit_code);
void RegisterBenchCommand(CLI::App& app, int* exit_code);
void RegisterSimCommand(CLI::App& app, int* exit_code);
void RegisterServeCommand(CLI::App& app, int* exit_code);
void RegisterConfigCommand(CLI::App& app, int* exit_code);
// --config and the override flags shared by `serve` and `config check` (cmd_config.cc).
void AddGatewayConfigFlags(CLI::App* cmd, std::string* config_path,
                           gateway::ConfigOverrides* overrides);
void RegisterSimulateCommand(CLI::App& app, int* exit_code);
void RegisterDemoCommand(CLI::App& app, int* exit_code);
void RegisterStoreCommand(CLI::App& app, int* exit_code);

}  // namespace kvroute::app
